import { Type } from '@sinclair/typebox'
import { ConfigDocumentSchema, documentedOnly } from '../../../catalog/document.js'
import { SUMMARY_KINDS } from '../../../catalog/types.js'
import { applyConfigDocument } from '../../../usecases/applyConfig.js'
import { defineRoute } from '../../route.js'

const Names = Type.Array(Type.String())
const Changes = Type.Object({ created: Names, updated: Names, unchanged: Names })

export const applyConfig = defineRoute({
  method: 'POST',
  path: '/v1/config/apply',
  operationId: 'config.apply',
  summary: "Apply a config document: the project's catalog as code",
  description:
    'Creates or updates the features, plans, plan versions, customers, subscriptions, grants and budgets the document names, all or nothing; ' +
    'dryRun: true reports what would change without applying. A document with problems is 400 with details.kind (invalid_config, slug_conflict or ' +
    'unresolved_reference) and details.issues naming every problem with its JSON path. A concurrent apply is 409 (catalog_changed).',
  tags: ['catalog'],
  access: { kind: 'project', scope: 'catalog:write' },
  // The catalog service validates the document itself, to report schema problems like the rest.
  body: documentedOnly(ConfigDocumentSchema),
  response: Type.Object({
    dryRun: Type.Boolean(),
    catalogVersion: Type.Integer({ description: 'The catalog version after the apply; for a dry run or a document that changed nothing, the current one.' }),
    summary: Type.Object(Object.fromEntries([...SUMMARY_KINDS.map((kind) => [kind, Changes] as const), ['credits', Type.Optional(Changes)] as const]), {
      description:
        'What was (or, in a dry run, would be) created, updated or left unchanged, by name: slugs, plan@version, ids, budget keys; credits (only when the document has credits) by their ids.',
    }),
  }),
  errors: [409],
  // Wallet credits of the document (src/wallet/README.md) are checked before and granted after the catalog.
  handler: ({ body, projectId, principal, services }) =>
    applyConfigDocument(services, projectId, body, principal.kind === 'project' ? principal.keyId : 'root'),
})
