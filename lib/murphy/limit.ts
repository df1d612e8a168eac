// A minimal concurrency limiter: at most `max` calls of run() in flight at once.

export class Limiter {
  private active = 0;
  private readonly queue: Array<() => void> = [];
  constructor(readonly max: number) {}

  run<T>(fn: () => T | Promise<T>): Promise<T> {
    if (this.active < this.max) return this.start(fn);
    return new Promise<T>((resolve, reject) => {
      this.queue.push(() => this.start(fn).then(resolve, reject));
    });
  }

  private start<T>(fn: () => T | Promise<T>): Promise<T> {
    this.active++;
    let p: Promise<T>;
    try {
      p = Promise.resolve(fn());
    } catch (e) {
      p = Promise.reject(e);
    }
    return p.finally(() => {
      this.active--;
      const next = this.queue.shift();
      if (next) next();
    });
  }
}
