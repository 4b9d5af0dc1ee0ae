import { Type } from '@sinclair/typebox'
import { success } from '../../../kernel/errors.js'
import { strictObject } from '../../../kernel/schema.js'
import { defineRoute } from '../../route.js'

export const replayDeadLetters = defineRoute({
  method: 'POST',
  path: '/v1/usage/dead-letters/replay',
  operationId: 'usage.deadLetters.replay',
  summary: 'Send dead-lettered usage batches to the ingest worker again',
  description:
    'Each named dead letter holding events of the project goes back to the ingest queue whole, with its batch id and the full ' +
    'retries; ClickHouse keeps every event once however often a batch is replayed (src/events/README.md). Ids that are not dead ' +
    "letters with events of the key's project are answered in notFound. Our addition to the spec.",
  tags: ['usage'],
  access: { kind: 'project', scope: 'budgets:write' },
  body: strictObject({
    ids: Type.Array(Type.String({ minLength: 1, maxLength: 128 }), { minItems: 1, maxItems: 100, description: 'From POST /v1/usage/dead-letters/list.' }),
  }),
  response: Type.Object({
    requeued: Type.Array(Type.String(), { description: 'The dead letters now back in the ingest queue.' }),
    notFound: Type.Array(Type.String()),
  }),
  handler: async ({ body, projectId, services }) => success(await services.events.replayProjectDeadLetters(projectId, body.ids)),
})
