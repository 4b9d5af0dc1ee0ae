-- Reads or ends a run. A run past its deadline is expired first (lazily, on every touch).
-- KEYS: 1 runs hash, 2 wallet hash, 3 credits hash, 4 journal list, 5 run deadlines, 6 run purges,
--       7 lease settlements
-- ARGV: 1 projectId, 2 customerId, 3 nowMs, 4 runId, 5 'get' or the status to end with
--       (completed | canceled | failed)
-- Returns { status, run... } with status 'ok' | 'run_not_found' (alone) | 'replayed' (ending a
-- run already ended with that status) | 'run_not_running' (ended otherwise, or expired).
-- src/runs/errors.ts translates the refusing statuses.
-- Ending a run ends its running descendants first, as canceled (expired past their deadline).
--@include money
--@include wallet
--@include runs
local ctx = runContext(KEYS, ARGV[1], ARGV[2], tonumber(ARGV[3]))
local r = runLoad(ctx, ARGV[4])
if not r then return { 'run_not_found' } end
local expired = runExpireIfDue(ctx, r)
local status = 'ok'
if ARGV[5] ~= 'get' then
  if r.st == 'running' then
    runEnd(ctx, r, ARGV[5])
  elseif r.st == ARGV[5] and not expired then
    status = 'replayed'
  else
    status = 'run_not_running'
  end
end
runSave(ctx)
return runReply(r, { status })
