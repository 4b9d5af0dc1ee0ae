import { Type } from '@sinclair/typebox'
import { success } from '../../../kernel/errors.js'
import { strictObject } from '../../../kernel/schema.js'
import { defineRoute } from '../../route.js'

const CustomerIdText = (description: string) => Type.String({ minLength: 1, maxLength: 36, description })

export const listCustomers = defineRoute({
  method: 'POST',
  path: '/v1/customers/list',
  operationId: 'customers.list',
  summary: "The project's customers, by id",
  description:
    'The ids of the customers that config documents created (POST /v1/config/apply), in code-point order, a page at a time: ' +
    "`prefix` keeps the ids that start with it, `after` starts past an id (pass the answer's nextCursor), `limit` 1–1,000 (100). " +
    'Our addition to the spec (the console lists customers with it).',
  tags: ['catalog'],
  access: { kind: 'project', scope: 'catalog:read' },
  body: strictObject({
    prefix: Type.Optional(Type.String({ maxLength: 36, description: 'Only ids that start with this text.' })),
    after: Type.Optional(CustomerIdText('Only ids after this one: the nextCursor of the page before.')),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: 'Default 100.' })),
  }),
  response: Type.Object(
    {
      customers: Type.Array(Type.Object({ id: Type.String() })),
      nextCursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass it as `after` for the next page; null on the last page.' }),
    },
    { description: 'A page of customer ids.' },
  ),
  handler: async ({ body, projectId, services }) => {
    const { prefix = '', after, limit = 100 } = body
    const ids = (await services.catalog.listCustomerIds(projectId)).filter((id) => id.startsWith(prefix) && (after === undefined || id > after))
    const page = ids.slice(0, limit)
    return success({ customers: page.map((id) => ({ id })), nextCursor: ids.length > limit ? page[page.length - 1]! : null })
  },
})
