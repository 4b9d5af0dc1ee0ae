import { Type } from '@sinclair/typebox'
import { success } from '../../../kernel/errors.js'
import { strictObject } from '../../../kernel/schema.js'
import { defineRoute } from '../../route.js'
import { closeInvoiceCycles } from '../invoices/close.js'

export const adminCloseInvoiceCycles = defineRoute({
  method: 'POST',
  path: '/v1/admin/invoices/close',
  operationId: 'admin.invoices.close',
  summary: "Close a project's ended billing cycles into invoices now (root key only)",
  description:
    'POST /v1/invoices/close for the operator, naming the project: what `npm run cli -- invoices close` asks a running gateway ' +
    'to do, since closing a cycle reads its usage from ClickHouse and only the gateway may open the embedded chDB while it runs. ' +
    'Idempotent: a cycle already invoiced is counted in `existing` and never invoiced twice. Our addition to the spec.',
  tags: ['admin'],
  access: { kind: 'root' },
  body: strictObject({
    projectId: Type.String({ minLength: 1, maxLength: 128 }),
    customerId: Type.Optional(
      Type.String({ minLength: 1, maxLength: 36, description: "Only this customer's subscriptions (default: every customer of the project)." }),
    ),
  }),
  response: closeInvoiceCycles.response,
  handler: async ({ body, services }) => {
    const report = await services.invoices.closeDueCycles(body.projectId, undefined, body.customerId)
    return success({
      created: report.created,
      finalized: report.finalized,
      existing: report.existing,
      errors: report.errors.map(({ subscriptionId, message }) => ({ subscriptionId, message })),
    })
  },
})
