import { Type } from '@sinclair/typebox'
import { DEAD_LETTERS_EXAMINED } from '../../../events/service.js'
import { success } from '../../../kernel/errors.js'
import { strictObject } from '../../../kernel/schema.js'
import { defineRoute } from '../../route.js'

export const listDeadLetters = defineRoute({
  method: 'POST',
  path: '/v1/usage/dead-letters/list',
  operationId: 'usage.deadLetters.list',
  summary: 'Usage batches the ingest worker gave up on, with events of this project',
  description:
    'Accepted usage events are written to ClickHouse by the ingest worker in batches; a batch that failed every attempt waits in the ' +
    `dead-letter queue until it is replayed. Lists up to \`limit\` of those (among the oldest ${DEAD_LETTERS_EXAMINED}) holding events of the key's project, ` +
    "oldest first, describing only this project's events: how many, their customers (at most 20), the span of their timestamps, and " +
    'why and when the batch was given up. Our addition to the spec.',
  tags: ['usage'],
  access: { kind: 'project', scope: 'budgets:read' },
  body: strictObject({ limit: Type.Optional(Type.Integer({ minimum: 1, maximum: DEAD_LETTERS_EXAMINED, description: 'Default 100.' })) }),
  response: Type.Object({
    deadLetters: Type.Array(
      Type.Object({
        id: Type.String({ description: 'The dead letter, for POST /v1/usage/dead-letters/replay.' }),
        batchId: Type.String(),
        events: Type.Integer({ description: "The project's events in the batch." }),
        customerIds: Type.Array(Type.String()),
        fromMs: Type.Integer({ description: 'The earliest timestamp of those events, epoch ms.' }),
        toMs: Type.Integer({ description: 'The latest, epoch ms.' }),
        failedReason: Type.String(),
        attempts: Type.Integer(),
        atMs: Type.Integer({ description: 'When the batch was given up, epoch ms.' }),
      }),
    ),
  }),
  handler: async ({ body, projectId, services }) => success({ deadLetters: await services.events.projectDeadLetters(projectId, body.limit ?? 100) }),
})
