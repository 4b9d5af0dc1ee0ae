import { pino, type Logger } from 'pino'
import type { Config } from './config.js'

/** The service's logger: JSON lines, or colored lines for a person at a terminal (LOG_PRETTY). */
export function createLogger(config: Pick<Config, 'logLevel' | 'prettyLogs'>): Logger {
  return config.prettyLogs
    ? pino({ level: config.logLevel, transport: { target: 'pino-pretty', options: { colorize: true } } })
    : pino({ level: config.logLevel })
}
