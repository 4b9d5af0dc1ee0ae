import { documentValidator, type ConfigDocument } from '../catalog/document.js'
import type { CatalogService } from '../catalog/service.js'
import type { WalletService } from '../wallet/service.js'

/**
 * Applies a config document with its wallet credits (POST /v1/config/apply and `npm run cli --
 * apply`): the catalog's apply, and when the document has `credits`, those checked before and
 * granted after it (WalletService.applyDocumentCredits). A document that fails the schema, or
 * names another project, is left to the catalog's apply, which reports it.
 */
export function applyConfigDocument(services: { catalog: CatalogService; wallet: WalletService }, projectId: string, body: unknown, actor: string) {
  const apply = () => services.catalog.apply(projectId, body, actor)
  if (!documentValidator.check(body)) return apply()
  const doc = body as ConfigDocument
  if (doc.credits === undefined || (doc.projectId !== undefined && doc.projectId !== projectId)) return apply()
  return services.wallet.applyDocumentCredits(projectId, doc.credits, new Set((doc.customers ?? []).map((c) => c.id)), doc.dryRun === true, apply)
}
