import { Type } from '@sinclair/typebox'
import { success } from '../../../kernel/errors.js'
import { defineRoute } from '../../route.js'
import { strictObject } from '../../../kernel/schema.js'

export const closeInvoiceCycles = defineRoute({
  method: 'POST',
  path: '/v1/invoices/close',
  operationId: 'invoices.close',
  summary: "Close the project's ended billing cycles into invoices now",
  description:
    "What the invoice worker does on its interval (METERING_INVOICE_INTERVAL_MS), for the key's project, now: every billing " +
    'cycle that has ended and has no final invoice gets one (src/invoices/README.md). Idempotent: a cycle already invoiced is ' +
    'counted in `existing` and never invoiced twice. Our addition to the spec; answers the ids to read with GET /v1/invoices/get/{invoiceId}.',
  tags: ['billing'],
  access: { kind: 'project', scope: 'invoices:write' },
  body: strictObject({
    customerId: Type.Optional(
      Type.String({ minLength: 1, maxLength: 36, description: "Only this customer's subscriptions (default: every customer of the project)." }),
    ),
  }),
  response: Type.Object(
    {
      created: Type.Array(Type.String(), { description: 'Invoices this call created.' }),
      finalized: Type.Array(Type.String(), { description: 'Invoices this call finished that an interrupted close had drafted.' }),
      existing: Type.Integer({ description: 'Ended cycles whose invoice already existed.' }),
      errors: Type.Array(Type.Object({ subscriptionId: Type.String(), message: Type.String() }), {
        description: 'Subscriptions whose cycles could not be closed this time (retried by the next close).',
      }),
    },
    { additionalProperties: false },
  ),
  handler: async ({ body, projectId, services }) => {
    const report = await services.invoices.closeDueCycles(projectId, undefined, body.customerId)
    return success({
      created: report.created,
      finalized: report.finalized,
      existing: report.existing,
      errors: report.errors.map(({ subscriptionId, message }) => ({ subscriptionId, message })),
    })
  },
})
