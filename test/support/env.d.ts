// Types for the values test/support/globalSetup.ts provide()s; read them in
// tests with inject('redisUrl') etc., or via the helpers in ./redis.ts.
import 'vitest'

declare module 'vitest' {
  export interface ProvidedContext {
    /** redis://127.0.0.1:PORT of the shared standalone redis-server (no persistence). */
    redisUrl: string
    /** Seed nodes of the shared 3-master Redis Cluster. */
    clusterNodes: { host: string; port: number }[]
    /** http://127.0.0.1:PORT of the shared clickhouse-server (Debian 18.16); see ./clickhouse.ts. */
    clickhouseUrl: string
  }
}
