import { InvoiceGetResponseSchema } from '../../../invoices/schemas.js'
import { defineRoute } from '../../route.js'

export const getInvoice = defineRoute({
  method: 'GET',
  path: '/v1/invoices/get/:invoiceId',
  operationId: 'invoices.get',
  summary: 'An invoice with its lines',
  description:
    'The invoice of one billing cycle with its lines, amounts at ledger scale 8 (spec 4.12). 404 invoice_not_found for an unknown id or one of another project.',
  tags: ['billing'],
  access: { kind: 'project', scope: 'invoices:read' },
  response: InvoiceGetResponseSchema,
  handler: ({ params, projectId, services }) => services.invoices.get(projectId, params.invoiceId!),
})
