// Data-parallel training (docs/distributed.md): the collective interface and its backends (CPU
// over TCP, NCCL), the choice between them, the rendezvous, the job's environment, the launcher,
// the bucket and shard plans, ZeRO-1.
export {
  CollectiveError, SoloCollective, allGatherJson, broadcastJson, allReduceNumbers, splitCounts,
  type Collective, type ReduceOp, type FloatArray, type DataArray, type ReduceScatterOptions,
} from './collective.js';
export { TcpCollective, type TcpCollectiveOptions } from './tcp.js';
export { NcclCollective, HostStaging, DeviceStaging, type NcclCollectiveOptions, type Staging } from './nccl-collective.js';
export { defaultDistBackend, distBackendFor, joinJob, narrowVisibleDevices, type DistBackend, type TrainDevice } from './backend.js';
export { rendezvous, RendezvousError, type RendezvousOptions, type RendezvousResult, type PeerAddress } from './rendezvous.js';
export { readDistEnv, firstSlurmHost, DistEnvError, DEFAULT_MASTER_PORT, type DistEnv } from './env.js';
export { launchLocal, nodeLayout, rankEnv, type LaunchOptions, type NodeLayout } from './launch.js';
export { flatLayout, planBuckets, type Bucket, type FlatParam } from './buckets.js';
export { planShards, rangeCounts, assembleRange, SHARD_ALIGN, type ShardPlan, type Range } from './shards.js';
export { DistributedPolicy, checkpointShards, shardFileName, type GradientAccess, type ZeroOptions } from './zero.js';
export { DataParallel, dealMicroBatches, type StepParallel } from './data-parallel.js';
