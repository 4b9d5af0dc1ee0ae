// A small catalog for run and wallet tests: `calls` (count, $0.002 each: linear), `tokens`
// (sum of properties.tokens, graduated: 1–1,000 at $0.01, then $0.001 with a $1 flat fee),
// `pkg` (sum of properties.n, $0.05 per package of 10), `capped` (count, $0.01, at most 2 a
// month, overage none). Customer `acme` subscribed since 2025-01-01.
export const RUNS_CATALOG = {
  features: [
    { slug: 'calls', title: 'Calls', unitOfMeasure: 'calls', meterConfig: { eventSlug: 'api.call', aggregationMethod: 'count', windowSize: 'MINUTE' } },
    {
      slug: 'tokens',
      title: 'Tokens',
      unitOfMeasure: 'tokens',
      meterConfig: { eventSlug: 'llm.tokens', aggregationMethod: 'sum', aggregationField: 'tokens', windowSize: 'MINUTE' },
    },
    {
      slug: 'pkg',
      title: 'Packages',
      unitOfMeasure: 'items',
      meterConfig: { eventSlug: 'pkg.items', aggregationMethod: 'sum', aggregationField: 'n', windowSize: 'MINUTE' },
    },
    {
      slug: 'capped',
      title: 'Capped calls',
      unitOfMeasure: 'calls',
      meterConfig: { eventSlug: 'capped.call', aggregationMethod: 'count', windowSize: 'MINUTE' },
    },
    { slug: 'other', title: 'Not in the plan', unitOfMeasure: 'x' },
  ],
  plans: [{ slug: 'pro', title: 'Pro' }],
  planVersions: [
    {
      plan: 'pro',
      version: 1,
      status: 'published',
      title: 'Pro',
      currency: 'USD',
      billingConfig: { billingInterval: 'month' },
      features: [
        { featureSlug: 'calls', featureType: 'usage', config: { usageMode: 'unit', price: '0.002' } },
        {
          featureSlug: 'tokens',
          featureType: 'usage',
          config: {
            usageMode: 'tier',
            tierMode: 'graduated',
            tiers: [
              { firstUnit: 1, lastUnit: 1000, unitPrice: '0.01', flatPrice: '0' },
              { firstUnit: 1001, lastUnit: null, unitPrice: '0.001', flatPrice: '1' },
            ],
          },
        },
        { featureSlug: 'pkg', featureType: 'usage', config: { usageMode: 'package', price: '0.05', units: 10 } },
        { featureSlug: 'capped', featureType: 'usage', config: { usageMode: 'unit', price: '0.01' }, limit: 2, metadata: { overageStrategy: 'none' } },
      ],
    },
  ],
  customers: [
    { id: 'acme', name: 'Acme' },
    { id: 'globex', name: 'Globex' },
  ],
  subscriptions: [
    { id: 'sub_acme', customerId: 'acme', phases: [{ plan: 'pro', version: 1, startAt: Date.UTC(2025, 0, 1) }] },
    { id: 'sub_globex', customerId: 'globex', phases: [{ plan: 'pro', version: 1, startAt: Date.UTC(2025, 0, 1) }] },
  ],
}
