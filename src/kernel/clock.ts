/** The one source of "now" (epoch ms). Injected everywhere so tests move time without sleeping. */
export type Clock = () => number

export const systemClock: Clock = () => Date.now()

/** A clock tests set and advance by hand. */
export function manualClock(startMs: number): Clock & { set(ms: number): void; advance(ms: number): void } {
  let now = startMs
  const clock = (() => now) as Clock & { set(ms: number): void; advance(ms: number): void }
  clock.set = (ms) => {
    now = ms
  }
  clock.advance = (ms) => {
    now += ms
  }
  return clock
}
