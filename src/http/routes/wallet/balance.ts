import { Type } from '@sinclair/typebox'
import { checkProject } from '../../../catalog/service.js'
import { defineRoute } from '../../route.js'
import { CustomerId, WalletBalanceSchema } from '../../../wallet/schemas.js'

export const walletBalance = defineRoute({
  method: 'GET',
  path: '/v1/wallet/balance',
  operationId: 'wallet.balance',
  summary: "A customer's wallet balance with holds and credits",
  description:
    'available: cash and live credits not held by running runs; held: what running runs reserved; credits: the live credits in the order they are consumed ' +
    '(priority, then earliest expiry). Credits past their expiry are expired first (journaled). A wallet that never held money answers zero in USD. ' +
    "A projectId other than the key's is 403.",
  tags: ['wallet'],
  access: { kind: 'project', scope: 'wallet:read' },
  query: Type.Object({ customerId: CustomerId, projectId: Type.Optional(Type.String({ minLength: 1 })) }, { additionalProperties: false }),
  response: WalletBalanceSchema,
  handler: ({ query, projectId, services }) => checkProject(query.projectId, projectId) ?? services.wallet.balance(projectId, query.customerId),
})
