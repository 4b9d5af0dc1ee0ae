// @metering/client: a typed client of the metering gateway (README.md beside this folder).
export { CLIENT_VERSION, createClient, MeteringClient, type MeteringClientOptions } from './client.js'
export {
  BadRequestError,
  type Blocked,
  BudgetExceededError,
  ConflictError,
  ForbiddenError,
  type Issue,
  InternalServerError,
  MeteringError,
  NetworkError,
  NotFoundError,
  PayloadTooLargeError,
  PreconditionFailedError,
  RateLimitedError,
  type Remedy,
  ServiceUnavailableError,
  UnauthorizedError,
} from './errors.js'
export * from './generated.js'
export { type HoldContext, type HoldOptions, type HoldResult, HoldReleaseError, type WorkResult } from './hold.js'
export { fromUnits, isAmount, toUnits } from './money.js'
export { type BatchOptions, DEFAULT_BATCH, type RecordResult } from './recorder.js'
export { type CallOptions, DEFAULT_RETRY, type OperationInput, type RetryOptions, replaySafe } from './transport.js'
