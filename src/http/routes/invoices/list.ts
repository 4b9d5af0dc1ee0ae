import { InvoiceListRequestSchema, InvoiceListResponseSchema } from '../../../invoices/schemas.js'
import { defineRoute } from '../../route.js'

export const listInvoices = defineRoute({
  method: 'POST',
  path: '/v1/invoices/list',
  operationId: 'invoices.list',
  summary: "The project's invoices, newest first",
  description:
    "Every invoice of the key's project, whoever closed its cycle (the invoice worker, or POST /v1/invoices/close), drafts included, " +
    'filtered by customer, status and the start of the statement period, a page at a time (cursor). Read from Redis, where invoices ' +
    'and their status live (ClickHouse receives their lines once the journal is drained). Our addition to the spec. 400 invalid_cursor ' +
    'for a cursor this service did not hand out, invalid_period when statementTo is not after statementFrom.',
  tags: ['billing'],
  access: { kind: 'project', scope: 'invoices:read' },
  body: InvoiceListRequestSchema,
  response: InvoiceListResponseSchema,
  handler: ({ body, projectId, services }) => {
    const { limit = 20, ...filters } = body
    return services.invoices.list(projectId, { ...filters, limit })
  },
})
