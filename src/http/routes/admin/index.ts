import { adminCloseInvoiceCycles } from './invoicesClose.js'
import { adminSql } from './sql.js'

/** The operator's routes (root key only) that `npm run cli` calls on a running gateway. */
export const adminRoutes = [adminSql, adminCloseInvoiceCycles] as const
