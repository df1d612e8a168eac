// Data-parallel training (docs/distributed.md): the collective interface and its CPU backend,
// the rendezvous, the job's environment, the launcher, the bucket and shard plans, ZeRO-1.
export {
  CollectiveError, SoloCollective, allGatherJson, broadcastJson, allReduceNumbers, splitCounts,
  type Collective, type ReduceOp, type FloatArray, type DataArray, type ReduceScatterOptions,
} from './collective.js';
export { TcpCollective, type TcpCollectiveOptions } from './tcp.js';
export { rendezvous, RendezvousError, type RendezvousOptions, type RendezvousResult, type PeerAddress } from './rendezvous.js';
export { readDistEnv, firstSlurmHost, DistEnvError, DEFAULT_MASTER_PORT, type DistEnv } from './env.js';
export { launchLocal, nodeLayout, rankEnv, type LaunchOptions, type NodeLayout } from './launch.js';
export { flatLayout, planBuckets, type Bucket, type FlatParam } from './buckets.js';
export { planShards, rangeCounts, assembleRange, SHARD_ALIGN, type ShardPlan, type Range } from './shards.js';
export { DistributedPolicy, checkpointShards, shardFileName, type GradientAccess, type ZeroOptions } from './zero.js';
export { DataParallel, dealMicroBatches, type StepParallel } from './data-parallel.js';
