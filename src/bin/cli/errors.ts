/** A command that could not do its work, with what to do about it (printed without a stack trace; exit 1). */
export class CliFailure extends Error {
  override name = 'CliFailure'
}
