// Lean script calls on a Redis Cluster: one lean connection (lean.ts) per master node, chosen per
// call by the slot of the call's first key (every script's keys share one hash tag), from ioredis
// Cluster's own slot map (`cluster.slots[slot][0]`, "host:port" of the master).
//
// ioredis keeps everything the lean path does not do: a call it cannot place (no slot map yet, no
// key, a node without a ready lean connection, a node set aside) goes through ioredis. A reply
// MOVED / ASK / TRYAGAIN / CLUSTERDOWN means the script did not run: the call is sent again through
// ioredis (which follows the redirection and refreshes its slot map), transparently to the caller,
// and that node's lean connection is set aside until ioredis' slot map was refreshed or
// SET_ASIDE_MS passed. The node of a slot is read from the map at every call, so after a refresh
// (failover, resharding, new nodes) no stale node is used; connections to nodes that left the map
// are closed. Connections open lazily (at most once per RECONNECT_MS per node, while the Cluster is
// ready), close when the Cluster ends, time out by lean.ts' sweep, and never carry multi calls.

import type { Cluster } from 'ioredis'
import { LeanConnection, type LeanTarget } from './lean.js'

/** A node answered a redirection: its lean connection is not used for this long, or until the slot map is refreshed. */
export const SET_ASIDE_MS = 1_000
const RECONNECT_MS = 1_000
const REDIRECTED = /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN) /

/** What a reply error says: the call did not run where it was sent, ioredis should place it. */
export function isRedirection(error: unknown): boolean {
  return error instanceof Error && REDIRECTED.test(error.message)
}

const CRC16 = (() => {
  const table = new Uint16Array(256)
  for (let i = 0; i < 256; i++) {
    let crc = i << 8
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1
    table[i] = crc & 0xffff
  }
  return table
})()

/** The Cluster slot of `key` (CRC16/XMODEM of its hash tag, or of the whole key), as Redis and ioredis compute it. */
export function keySlot(key: string): number {
  let from = 0
  let to = key.length
  const open = key.indexOf('{')
  if (open >= 0) {
    const close = key.indexOf('}', open + 1)
    if (close > open + 1) {
      from = open + 1
      to = close
    }
  }
  let crc = 0
  for (let i = from; i < to; i++) {
    const code = key.charCodeAt(i)
    if (code >= 128) return crcOfBytes(Buffer.from(key.slice(from, to)))
    crc = ((crc << 8) & 0xffff) ^ CRC16[((crc >> 8) ^ code) & 0xff]!
  }
  return crc & 0x3fff
}

function crcOfBytes(bytes: Buffer): number {
  let crc = 0
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ CRC16[((crc >> 8) ^ byte) & 0xff]!
  return crc & 0x3fff
}

/** One master's lean connection. */
interface Node {
  lean: LeanConnection
  lastAttemptMs: number
  /** Set aside (a redirection) until this time, or until the slot map's refresh count differs from `asideRefresh`. */
  asideUntilMs: number
  asideRefresh: number
}

/** What a Cluster's lean connections share: the options of each node's target. */
export interface LeanClusterOptions {
  name: string
  timeoutMs: number | undefined
  username?: string | undefined
  password?: string | undefined
}

/** A Cluster with `slots`, as ioredis keeps it (public in its source, not in its types). */
type SlotMapped = Cluster & { slots: (string[] | undefined)[] }

class LeanCluster {
  readonly nodes = new Map<string, Node>()
  /** ioredis' "refresh" events so far: a new slot map. */
  refreshes = 0

  constructor(
    readonly cluster: SlotMapped,
    readonly options: LeanClusterOptions,
  ) {}

  /** The ready lean connection for `slot`'s master, or undefined (opening it when it may be). */
  nodeFor(slot: number): { key: string; node: Node } | undefined {
    const key = this.cluster.slots[slot]?.[0]
    if (key === undefined) return undefined
    let node = this.nodes.get(key)
    if (node === undefined) {
      node = { lean: new LeanConnection(this.target(key)), lastAttemptMs: Number.NEGATIVE_INFINITY, asideUntilMs: 0, asideRefresh: 0 }
      this.nodes.set(key, node)
    }
    if (node.asideUntilMs !== 0) {
      if (node.asideRefresh === this.refreshes && Date.now() < node.asideUntilMs) return undefined
      node.asideUntilMs = 0
    }
    if (node.lean.ready) return { key, node }
    const now = Date.now()
    if (now - node.lastAttemptMs >= RECONNECT_MS && this.cluster.status === 'ready') {
      node.lastAttemptMs = now
      node.lean.connect()
    }
    return undefined
  }

  private target(key: string): LeanTarget {
    const colon = key.lastIndexOf(':')
    return {
      host: key.slice(0, colon).replace(/^\[|\]$/g, ''),
      port: Number(key.slice(colon + 1)),
      db: 0,
      username: this.options.username,
      password: this.options.password,
      name: `${this.options.name}-fcall`,
      timeoutMs: this.options.timeoutMs,
      multi: false,
    }
  }

  setAside(node: Node): void {
    node.asideUntilMs = Date.now() + SET_ASIDE_MS
    node.asideRefresh = this.refreshes
  }

  /** A new slot map: connections to nodes that no longer master a slot close. */
  refreshed(): void {
    this.refreshes++
    const masters = new Set<string>()
    for (const keys of this.cluster.slots) if (keys?.[0] !== undefined) masters.add(keys[0])
    for (const [key, node] of this.nodes) {
      if (masters.has(key)) continue
      node.lean.close()
      this.nodes.delete(key)
    }
  }

  close(): void {
    for (const node of this.nodes.values()) node.lean.close()
    this.nodes.clear()
  }
}

const clusters = new WeakMap<object, LeanCluster>()

/** Gives `cluster` lean connections for its script calls (opened on first use, closed when it ends). */
export function attachLeanCluster(cluster: Cluster, options: LeanClusterOptions): void {
  const lean = new LeanCluster(cluster as SlotMapped, options)
  clusters.set(cluster, lean)
  cluster.on('refresh', () => lean.refreshed())
  cluster.on('end', () => lean.close())
}

/** The lean connection `cluster` would use for a call whose first key is `key` now, or undefined (tests). */
export function leanClusterNode(cluster: object, key: string): LeanConnection | undefined {
  return clusters.get(cluster)?.nodeFor(keySlot(key))?.node.lean
}

/**
 * FCALL `fn` on the lean connection of the master of `keys[0]`'s slot, or undefined when the lean
 * path cannot place it (the caller goes through ioredis). A redirection reply sends the call again
 * through `viaIoredis` and sets that node aside.
 */
export function leanClusterFcall(
  cluster: object,
  fn: string,
  keys: readonly string[],
  args: readonly (string | number)[],
  viaIoredis: () => Promise<unknown>,
): Promise<unknown> | undefined {
  const lean = clusters.get(cluster)
  if (lean === undefined || keys.length === 0) return undefined
  const placed = lean.nodeFor(keySlot(keys[0]!))
  if (placed === undefined) return undefined
  return placed.node.lean.fcall(fn, keys, args).catch((error: unknown) => {
    if (!isRedirection(error)) throw error
    lean.setAside(placed.node)
    return viaIoredis()
  })
}
