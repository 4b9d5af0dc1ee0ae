// deadletters list / replay: what failed every attempt, and putting it back on the queue it came
// from. Two kinds:
// - ingest: batches of usage events the ingest worker could not write to ClickHouse, in the
//   dead-letter queue (src/events/deadLetters.ts; every project's, where
//   POST /v1/usage/dead-letters/list shows a project its own). A replay adds each batch to the
//   ingest queue again with its batch id, so ClickHouse keeps every event once even if it is
//   replayed twice (src/events/README.md).
// - webhooks: deliveries that failed every attempt, in the project's failed list (what
//   POST /v1/webhooks/failures/list answers). A replay is WebhookService.replayFailures: queued
//   again under the same delivery id (receivers see the same x-metering-delivery), then taken off
//   the failed list.

import { queueNames, type Container } from '../../container.js'
import { listDeadLetters, replayDeadLetters } from '../../events/deadLetters.js'
import type { RedisClient } from '../../infra/redis/scripts.js'
import type { FailedDelivery } from '../../notifications/webhooks.js'
import { intOption, stringOption, UsageError, type Command, type Input } from './command.js'

/** Webhook delivery ids (deliveryIdOf, src/notifications/delivery.ts); any other id names an ingest dead letter. */
const isDeliveryId = (id: string) => id.startsWith('dlv_')

async function webhookFailures(container: Container, projectId: string): Promise<FailedDelivery[]> {
  const listed = await container.services.webhooks.failures(projectId, container.notificationOptions.failedKept)
  return listed.ok ? listed.value.failures : []
}

/** The ingest queues, named as the gateway names them (src/container.ts queueNames). */
function ingestQueues(redis: RedisClient, container: Container) {
  const names = queueNames(container)
  return { connection: redis, ingestQueue: names.ingest, deadLetterQueue: names.deadLetter }
}

async function replay(ctx: Parameters<Command['run']>[0], input: Input): Promise<number> {
  const all = input.options.all === true
  const projectId = stringOption(input, 'project')
  const ids = input.args
  if (all === ids.length > 0) throw new UsageError('Name the dead letters to replay, or give --all (not both).')
  const deliveryIds = ids.filter(isDeliveryId)
  if (deliveryIds.length > 0 && !projectId) throw new UsageError('Webhook deliveries (dlv_…) belong to a project: give --project.')
  const redis = await ctx.redis()
  const container = await ctx.container()
  const ingestIds = ids.filter((id) => !isDeliveryId(id))
  const ingest =
    all || ingestIds.length > 0
      ? await replayDeadLetters({ ...ingestQueues(redis, container), retry: container.eventOptions.retry, ...(all ? {} : { ids: ingestIds }) })
      : []
  const named = all && projectId ? (await webhookFailures(container, projectId)).map((f) => f.deliveryId) : deliveryIds
  const replayed = projectId && named.length > 0 ? await container.services.webhooks.replayFailures(projectId, named) : undefined
  if (replayed && !replayed.ok) return ctx.fail(replayed.message)
  const webhooks = replayed?.value.requeued ?? []
  const missing = ids.filter((id) => !ingest.includes(id) && !webhooks.includes(id))
  ctx.print({ ingest, ...(projectId ? { webhooks } : {}), ...(missing.length > 0 ? { notFound: missing } : {}) })
  return missing.length > 0 ? 1 : 0
}

export const deadLetterCommands: readonly Command[] = [
  {
    noun: 'deadletters',
    verb: 'list',
    summary: 'ingest batches given up on; with --project, failed webhook deliveries too',
    details: ['Prints {"ingest": [...], "webhooks": [...]}: ids, why, when, how many attempts.'],
    options: {
      project: { type: 'string', value: 'ID', help: "also this project's failed webhook deliveries" },
      limit: { type: 'string', value: 'N', help: 'at most N of each kind, oldest ingest batches and newest deliveries first (default 100)' },
    },
    async run(ctx, input) {
      const limit = intOption(input, 'limit', 1, 100_000) ?? 100
      const projectId = stringOption(input, 'project')
      const redis = await ctx.redis()
      const container = await ctx.container()
      const ingest = await listDeadLetters(ingestQueues(redis, container), 0, limit - 1)
      const webhooks = projectId ? (await webhookFailures(container, projectId)).slice(0, limit) : undefined
      ctx.print({ ingest, ...(webhooks ? { webhooks } : {}) })
      return 0
    },
  },
  {
    noun: 'deadletters',
    verb: 'replay',
    summary: 'put dead letters back on the queue they came from (idempotent)',
    details: [
      'Ingest batches go back to the ingest queue with their batch id: ClickHouse keeps each event once, however often it is replayed.',
      'Webhook deliveries (ids dlv_…, with --project) are queued again under the same delivery id and leave the failed list.',
    ],
    args: [
      { name: 'ID', help: 'dead letters to replay: ingest ids and delivery ids (dlv_…), as `deadletters list` shows them', required: false, variadic: true },
    ],
    options: {
      all: { type: 'boolean', help: 'every ingest dead letter, and with --project every failed delivery of the project' },
      project: { type: 'string', value: 'ID', help: 'the project of the webhook deliveries' },
    },
    run: replay,
  },
]
