// The error of the training loop and its checkpoints (a run that cannot go on as asked).
export class TrainError extends Error {
  override name = 'TrainError';
}
