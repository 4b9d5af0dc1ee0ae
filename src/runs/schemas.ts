import { Type } from '@sinclair/typebox'

export const CustomerId = Type.String({ minLength: 1, maxLength: 36, pattern: '^[^\\s|]+$', description: "The customer's id (the catalog's, 1 to 36 characters)." })
export const RunId = Type.String({ minLength: 1, maxLength: 64, description: 'A run id (`run_<n>`).' })
