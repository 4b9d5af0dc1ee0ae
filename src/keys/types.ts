/** Who a request's key says the caller is: the root key, a project key with its scopes, or no key. */
export type Principal = { kind: 'root' } | { kind: 'project'; projectId: string; keyId: string; scopes: readonly string[] } | { kind: 'anonymous' }
