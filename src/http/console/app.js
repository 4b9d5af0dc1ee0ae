// The console (GET /console): plain browser JavaScript, served as it is (no build step). Every
// figure comes from the gateway's JSON API with the key typed at sign-in, which is kept in this
// tab's session storage only. Every value reaches the page as text (textContent, attributes set
// one by one); nothing is ever parsed as HTML, and the page's CSP (src/http/routes/console/)
// requires Trusted Types, so an innerHTML assignment would throw rather than render.

const KEY_SLOT = 'metering-console-key'
const SVG_NS = 'http://www.w3.org/2000/svg'
const COLORS = ['#2563eb', '#db2777', '#059669', '#d97706', '#7c3aed', '#0891b2', '#dc2626', '#4b5563']
const HOUR_MS = 3_600_000
const DAY_MS = 86_400_000

const state = { key: '', customersAfter: null, invoicesCursor: null }

// ---------------------------------------------------------------------------------------------
// DOM: elements from tag, attributes and children; text is always a text node.

/** An element; `attrs` are set with setAttribute (never an event handler); strings become text nodes. */
function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children)
}

/** An SVG element, as h. */
function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children)
}

function build(el, attrs, children) {
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (/^on/i.test(name)) throw new Error(`no event handler attributes: ${name}`)
    if (value === false || value === null || value === undefined) continue
    el.setAttribute(name, value === true ? '' : String(value))
  }
  append(el, children)
  return el
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue
    if (Array.isArray(child)) append(el, child)
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)))
  }
}

const byId = (id) => document.getElementById(id)

/** Replaces what a view shows. */
function show(view, ...children) {
  view.replaceChildren()
  append(view, children)
}

/** A table: `columns` are header texts, `rows` arrays of cells (text or nodes). */
function table(caption, columns, rows) {
  return h(
    'table',
    {},
    caption ? h('caption', {}, caption) : null,
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        columns.map((c) => h('th', { scope: 'col' }, c)),
      ),
    ),
    h(
      'tbody',
      {},
      rows.map((cells) =>
        h(
          'tr',
          {},
          cells.map((c) => h('td', {}, c)),
        ),
      ),
    ),
  )
}

/** A definition list from [term, value] pairs (pairs without a value are left out). */
function facts(pairs) {
  return h(
    'dl',
    { class: 'facts' },
    pairs.filter(([, v]) => v !== undefined && v !== null && v !== '').map(([k, v]) => h('div', {}, h('dt', {}, k), h('dd', {}, v))),
  )
}

function errorBox(error) {
  return h('p', { class: 'error', role: 'alert' }, describe(error))
}

function describe(error) {
  if (error instanceof ApiError) {
    const where = error.requestId ? ` (request ${error.requestId})` : ''
    return `${error.status ? `${error.status} ${error.code}` : error.code}: ${error.message}${where}`
  }
  return String(error?.message ?? error)
}

// ---------------------------------------------------------------------------------------------
// Values: money stays a decimal string (BigInt for ledger units), times are shown in UTC.

/** Ledger units (10⁻⁸, an integer or integer string) as a decimal: 1250000000 → "12.5". */
function ledger(units, currency) {
  const n = BigInt(units)
  const abs = n < 0n ? -n : n
  const fraction = (abs % 100000000n).toString().padStart(8, '0').replace(/0+$/, '')
  return `${n < 0n ? '-' : ''}${abs / 100000000n}${fraction ? `.${fraction}` : ''}${currency ? ` ${currency}` : ''}`
}

/** Minor units of a currency (an integer) as a decimal in major units, with the currency's exponent. */
function minor(amount, currency) {
  let digits = 2
  try {
    digits = new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits
  } catch {
    // not an ISO code Intl knows: two decimals
  }
  const n = BigInt(amount)
  const abs = n < 0n ? -n : n
  const scale = 10n ** BigInt(digits)
  const fraction = digits > 0 ? `.${(abs % scale).toString().padStart(digits, '0')}` : ''
  return `${n < 0n ? '-' : ''}${abs / scale}${fraction} ${currency}`
}

function time(ms) {
  if (ms === null || ms === undefined) return '—'
  return `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`
}

function money(m) {
  return m ? m.display_amount || `${m.amount} ${m.currency}` : '—'
}

// ---------------------------------------------------------------------------------------------
// The API, with the key of this tab.

class ApiError extends Error {
  constructor(status, code, message, requestId) {
    super(message)
    this.status = status
    this.code = code
    this.requestId = requestId
  }
}

async function api(method, path, body, key = state.key) {
  const headers = { authorization: `Bearer ${key}` }
  if (body !== undefined) headers['content-type'] = 'application/json'
  let res
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store', credentials: 'omit' })
  } catch (error) {
    throw new ApiError(0, 'NETWORK', `The gateway did not answer (${error.message}).`)
  }
  const text = await res.text()
  let json
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  if (res.ok) return json
  const e = json?.error
  const error = new ApiError(res.status, e?.code ?? 'ERROR', e?.message ?? text.slice(0, 200), e?.requestId ?? res.headers.get('x-request-id'))
  if (res.status === 401 && key === state.key && state.key) signOut(error)
  throw error
}

const post = (path, body) => api('POST', path, body)
const get = (path) => api('GET', path)

/** Runs `load` into `view`: a busy marker meanwhile, the error in the view when it fails. */
async function into(view, load) {
  view.setAttribute('aria-busy', 'true')
  try {
    const content = await load()
    show(view, content)
  } catch (error) {
    show(view, errorBox(error))
  } finally {
    view.removeAttribute('aria-busy')
  }
}

// ---------------------------------------------------------------------------------------------
// Charts: inline SVG built with DOM calls; one polyline and one circle per point per series.

/**
 * A line chart of `series` ([{name, points: [{at, value}]}], value a decimal string). Plotting
 * needs numbers; the labels show the exact strings.
 */
function lineChart(title, series, step) {
  const W = 640
  const H = 220
  const pad = { left: 56, right: 12, top: 12, bottom: 28 }
  const all = series.flatMap((x) => x.points)
  const from = Math.min(...all.map((p) => p.at))
  const to = Math.max(...all.map((p) => p.at))
  const top = Math.max(1e-9, ...all.map((p) => Number(p.value)))
  const x = (at) => pad.left + (to === from ? 0 : ((at - from) / (to - from)) * (W - pad.left - pad.right))
  const y = (v) => H - pad.bottom - (Number(v) / top) * (H - pad.top - pad.bottom)
  const label = `${title}: ${series.map((x) => x.name).join(', ')}, ${time(from)} to ${time(to + step)}`
  const svg = s(
    'svg',
    { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label, class: 'chart' },
    axes(W, H, pad, top, from, to),
    series.map((line, i) => plot(line, COLORS[i % COLORS.length], x, y)),
  )
  return h('figure', { class: 'chart' }, h('figcaption', {}, title), svg, legend(series))
}

function axes(W, H, pad, top, from, to) {
  const base = H - pad.bottom
  return s(
    'g',
    { class: 'axes' },
    s('line', { x1: pad.left, y1: base, x2: W - pad.right, y2: base, stroke: '#9ca3af' }),
    s('line', { x1: pad.left, y1: pad.top, x2: pad.left, y2: base, stroke: '#9ca3af' }),
    s('text', { x: pad.left - 6, y: pad.top + 4, 'text-anchor': 'end', class: 'tick' }, shortNumber(top)),
    s('text', { x: pad.left - 6, y: base, 'text-anchor': 'end', class: 'tick' }, '0'),
    s('text', { x: pad.left, y: H - 8, 'text-anchor': 'start', class: 'tick' }, time(from)),
    s('text', { x: W - pad.right, y: H - 8, 'text-anchor': 'end', class: 'tick' }, time(to)),
  )
}

function plot(line, color, x, y) {
  const points = line.points.map((p) => `${x(p.at).toFixed(1)},${y(p.value).toFixed(1)}`).join(' ')
  return s(
    'g',
    { class: 'series', 'data-name': line.name },
    s('polyline', { points, fill: 'none', stroke: color, 'stroke-width': 2 }),
    line.points.map((p) =>
      s('circle', { cx: x(p.at).toFixed(1), cy: y(p.value).toFixed(1), r: 3, fill: color, class: 'point' }, s('title', {}, `${time(p.at)}: ${p.value}`)),
    ),
  )
}

function legend(series) {
  return h(
    'ul',
    { class: 'legend' },
    series.map((line, i) =>
      h(
        'li',
        {},
        s('svg', { viewBox: '0 0 10 10', width: 10, height: 10, 'aria-hidden': 'true' }, s('rect', { width: 10, height: 10, fill: COLORS[i % COLORS.length] })),
        line.name,
      ),
    ),
  )
}

function shortNumber(value) {
  return Number(value).toLocaleString('en', { maximumFractionDigits: 2 })
}

/** The last `buckets` whole hours or days, the current one included: [from, to) on bucket boundaries. */
function recent(interval, buckets) {
  const step = interval === 'hour' ? HOUR_MS : DAY_MS
  const to = Math.ceil((Date.now() + 1) / step) * step
  return { from: to - buckets * step, to, step }
}

// ---------------------------------------------------------------------------------------------
// Sign in and out.

async function signIn(key) {
  // Any read answers 401 for a key that is not valid; 403 (a missing scope) still signs in.
  try {
    await api('POST', '/v1/customers/list', { limit: 1 }, key)
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 403) throw error
  }
  state.key = key
  sessionStorage.setItem(KEY_SLOT, key)
  byId('sign-in').hidden = true
  byId('console').hidden = false
  byId('sign-out').hidden = false
  const who = byId('who')
  who.textContent = `Signed in with key …${key.slice(-4)}`
  who.hidden = false
  openTab('budgets')
}

function signOut(error) {
  state.key = ''
  sessionStorage.removeItem(KEY_SLOT)
  for (const view of document.querySelectorAll('.view, #customer-list')) view.replaceChildren()
  byId('console').hidden = true
  byId('sign-out').hidden = true
  byId('who').hidden = true
  byId('sign-in').hidden = false
  const message = byId('sign-in-error')
  message.textContent = error ? `The key was refused: ${describe(error)}` : ''
  message.hidden = !error
}

function openTab(name) {
  for (const button of document.querySelectorAll('[data-tab]')) button.setAttribute('aria-pressed', String(button.dataset.tab === name))
  for (const tab of document.querySelectorAll('.tab')) tab.hidden = tab.id !== `tab-${name}`
  if (name === 'customers' && !byId('customer-list').hasChildNodes()) listCustomers(false)
  if (name === 'invoices') showInvoices(byId('invoices-view'), {})
  if (name === 'webhooks') showWebhookFailures()
  if (name === 'dead-letters') showDeadLetters()
}

// ---------------------------------------------------------------------------------------------
// Budgets: configuration, limits with holds, and what was consumed over time.

async function showBudget(key, range) {
  const budget = await post('/v1/budgets/get', { key })
  const unit = budget.unit || ''
  const limits = budget.balance.limits.map((l) => [
    l.id,
    l.window,
    l.enforce,
    l.amount,
    l.consumed,
    l.held,
    l.remaining,
    h('meter', { min: 0, max: l.amount, value: sum(l.consumed, l.held), title: `${sum(l.consumed, l.held)} of ${l.amount} used or held` }),
    l.resetsAt === null ? 'never' : time(l.resetsAt),
  ])
  const chart = h('div', { class: 'chart-slot' })
  const view = h(
    'article',
    { class: 'budget' },
    h('h3', {}, budget.key),
    facts([
      ['Unit', unit || '—'],
      ['Remaining (least over hard limits)', budget.balance.remaining ?? 'no hard limit'],
      ['Held by open holds and leases', budget.balance.held],
      ['Hold TTL', `${budget.holds.defaultTtlMs} ms by default, at most ${budget.holds.maxTtlMs} ms`],
      ['Closes', budget.closesAt === null ? 'never' : time(budget.closesAt)],
      ['As of', time(budget.balance.asOf)],
    ]),
    table('Limits', ['Limit', 'Window', 'Enforce', 'Amount', 'Consumed', 'Held', 'Remaining', 'Used', 'Resets'], limits),
    chart,
  )
  into(chart, () => budgetChart(key, range, unit))
  return view
}

/** Exact sum of two decimal strings (for the meter's label). */
function sum(a, b) {
  const scale = (t) => {
    const [i, f = ''] = t.replace('-', '').split('.')
    const v = BigInt(i + f.padEnd(8, '0').slice(0, 8))
    return t.startsWith('-') ? -v : v
  }
  return ledger(scale(a) + scale(b))
}

async function budgetChart(key, range, unit) {
  const interval = range === '24h' ? 'hour' : 'day'
  const { from, to, step } = recent(interval, range === '24h' ? 24 : 30)
  const answer = await post('/v1/budgets/series', { key, fromMs: from, toMs: to, interval })
  const points = answer.points.map((p) => ({ at: p.at, value: p.consumed }))
  const title = `Consumed per ${interval}${unit ? ` (${unit})` : ''}`
  return [lineChart(title, [{ name: key, points }], step), movementsNote(answer.points)]
}

function movementsNote(points) {
  const movements = points.reduce((n, p) => n + p.movements, 0)
  return h('p', { class: 'note' }, `${movements} movement${movements === 1 ? '' : 's'} in the journal over this window.`)
}

// ---------------------------------------------------------------------------------------------
// Customers: entitlements, usage (table and chart), wallet, invoices, runs.

async function listCustomers(more) {
  const list = byId('customer-list')
  const status = byId('customer-list-status')
  if (!more) {
    list.replaceChildren()
    state.customersAfter = null
  }
  const body = { prefix: byId('customer-prefix').value, limit: 50 }
  if (more && state.customersAfter) body.after = state.customersAfter
  try {
    const page = await post('/v1/customers/list', body)
    for (const c of page.customers) {
      const button = h('button', { type: 'button', class: 'link', 'data-customer': c.id }, c.id)
      button.addEventListener('click', () => selectCustomer(c.id))
      list.append(h('li', {}, button))
    }
    state.customersAfter = page.nextCursor
    byId('customers-more').hidden = page.nextCursor === null
    status.textContent = list.childElementCount === 0 ? 'No customers.' : ''
  } catch (error) {
    status.textContent = describe(error)
  }
}

function selectCustomer(customerId) {
  for (const b of document.querySelectorAll('[data-customer]')) b.setAttribute('aria-current', String(b.dataset.customer === customerId))
  const part = (title) => h('section', { class: 'part', 'aria-label': title }, h('h4', {}, title), h('div', { class: 'part-body' }))
  const parts = {
    entitlements: part('Entitlements'),
    usage: part('Usage, last 30 days'),
    wallet: part('Wallet'),
    invoices: part('Invoices'),
    runs: part('Runs'),
  }
  show(byId('customer-view'), h('article', { class: 'customer' }, h('h3', {}, customerId), Object.values(parts)))
  const body = (p) => p.querySelector('.part-body')
  into(body(parts.entitlements), () => entitlements(customerId))
  into(body(parts.usage), () => usage(customerId))
  into(body(parts.wallet), () => wallet(customerId))
  showInvoices(body(parts.invoices), { customerId })
  show(body(parts.runs), runLookup())
}

async function entitlements(customerId) {
  const list = await post('/v1/access/entitlements/list', { customerId })
  if (list.length === 0) return h('p', { class: 'note' }, 'No entitlement in effect.')
  const rows = list.map((e) => {
    const feature = e.featurePlanVersion.feature
    const u = e.metadata?.usage
    return [
      feature.title ? `${feature.title} (${feature.slug})` : feature.slug,
      e.featurePlanVersion.featureType,
      u ? u.usage : '—',
      u?.limit ?? 'unlimited',
      u?.remaining ?? '—',
      u && u.refused !== '0' ? u.refused : '—',
      e.overageStrategy,
      u?.denied ? 'denied' : 'allowed',
      u?.periodEndAt ? time(u.periodEndAt) : '—',
    ]
  })
  return table(null, ['Feature', 'Type', 'Usage', 'Limit', 'Remaining', 'Refused', 'Overage', 'Access', 'Period ends'], rows)
}

async function usage(customerId) {
  const { from, to, step } = recent('day', 30)
  const [totals, series] = await Promise.all([
    post('/v1/analytics/usage/get', { range: '30d', customer_id: customerId }),
    post('/v1/analytics/usage/series', { customer_id: customerId, from_ms: from, to_ms: to, interval: 'day' }),
  ])
  if (totals.usage.length === 0 && series.features.length === 0) return h('p', { class: 'note' }, 'No usage in the last 30 days.')
  const rows = totals.usage.map((r) => [r.feature_slug, String(r.usage), String(r.refused), money(r.spending)])
  const lines = series.features.map((f) => ({ name: f.feature_slug, points: f.points.map((p) => ({ at: p.at, value: p.usage })) }))
  return [table(null, ['Feature', 'Usage', 'Refused', 'Spending'], rows), lines.length > 0 ? lineChart('Usage per day, by feature', lines, step) : null]
}

async function wallet(customerId) {
  const w = await get(`/v1/wallet/balance?customerId=${encodeURIComponent(customerId)}`)
  const credits = w.credits.map((c) => [c.id, c.source, money(c.issued), money(c.available), c.priority, c.expires_at ?? 'never'])
  return [
    facts([
      ['Available', money(w.available)],
      ['Held by running runs', money(w.held)],
    ]),
    credits.length > 0
      ? table('Credits', ['Credit', 'Source', 'Issued', 'Available', 'Priority', 'Expires'], credits)
      : h('p', { class: 'note' }, 'No credits.'),
  ]
}

function runLookup() {
  const input = h('input', { id: 'run-id', type: 'search', maxlength: 64, required: true })
  const out = h('div', { class: 'run-view' })
  const form = h('form', { class: 'inline' }, h('label', { for: 'run-id' }, 'Run id'), input, h('button', { type: 'submit' }, 'Show run'))
  form.addEventListener('submit', (event) => {
    event.preventDefault()
    into(out, () => run(input.value.trim()))
  })
  return [form, out]
}

async function run(runId) {
  const r = await get(`/v1/runs/get/${encodeURIComponent(runId)}`)
  return facts([
    ['Run', r.runId],
    ['Status', r.status],
    ['Customer', r.customerId],
    ['Reserved', minor(r.budgetAmountMinor, r.currency)],
    ['Consumed', minor(r.consumedAmountMinor, r.currency)],
    ['Remaining', minor(r.remainingAmountMinor, r.currency)],
    ['Workload', [r.workloadType, r.workloadId].filter(Boolean).join(' ')],
    ['Parent run', r.parentRunId],
    ['Budget', r.budgetKey],
    ['Started', time(r.startedAt)],
    ['Expires', time(r.expiresAt)],
    ['Ended', r.endedAt ? time(r.endedAt) : '—'],
  ])
}

// ---------------------------------------------------------------------------------------------
// Invoices: a page of headers; each opens its lines.

async function showInvoices(view, filters, cursor) {
  const lines = h('div', { class: 'invoice-lines' })
  await into(view, async () => {
    const page = await post('/v1/invoices/list', { ...filters, limit: 20, ...(cursor ? { cursor } : {}) })
    if (page.invoices.length === 0) return h('p', { class: 'note' }, 'No invoices.')
    const rows = page.invoices.map((i) => [
      invoiceButton(i, lines),
      i.customer_id,
      i.status,
      `${time(i.statement_start_at)} – ${time(i.statement_end_at)}`,
      ledger(i.gross_amount, i.currency),
      ledger(i.amount_due, i.currency),
      ledger(i.amount_paid, i.currency),
    ])
    const more = page.nextCursor ? h('button', { type: 'button' }, 'Next page') : null
    more?.addEventListener('click', () => showInvoices(view, filters, page.nextCursor))
    return [table(null, ['Invoice', 'Customer', 'Status', 'Period', 'Gross', 'Due', 'Paid'], rows), more, lines]
  })
}

function invoiceButton(invoice, out) {
  const button = h('button', { type: 'button', class: 'link', 'data-invoice': invoice.id }, invoice.id)
  button.addEventListener('click', () => into(out, () => invoiceLines(invoice.id)))
  return button
}

async function invoiceLines(invoiceId) {
  const { invoice, lines } = await get(`/v1/invoices/get/${encodeURIComponent(invoiceId)}`)
  const rows = lines.map((l) => [
    l.description,
    l.kind,
    String(l.quantity),
    ledger(l.amount, l.currency),
    ledger(l.amount_due, l.currency),
    l.settlement_source,
    l.settlement_status,
  ])
  return h(
    'article',
    { class: 'invoice' },
    h('h4', {}, `Invoice ${invoice.id}`),
    facts([
      ['Customer', invoice.customer_id],
      ['Status', invoice.status],
      ['Issued', time(invoice.issue_date)],
      ['Due', time(invoice.due_at)],
      ['Amount due', ledger(invoice.amount_due, invoice.currency)],
    ]),
    table('Lines', ['Description', 'Kind', 'Quantity', 'Amount', 'Due', 'Settled from', 'Settlement'], rows),
  )
}

// ---------------------------------------------------------------------------------------------
// Webhook failures and usage dead letters, each with a replay button.

function showWebhookFailures(notice) {
  return into(byId('webhooks-view'), async () => {
    const { failures } = await post('/v1/webhooks/failures/list', { limit: 100 })
    const rows = failures.map((f) => [
      time(f.failedAt),
      f.type,
      f.url,
      String(f.attempts),
      f.lastError || `HTTP ${f.lastStatus}`,
      h('code', {}, f.deliveryId),
      replayButton('/v1/webhooks/failures/replay', { deliveryIds: [f.deliveryId] }, `Delivery ${f.deliveryId}`, showWebhookFailures),
    ])
    return [
      notice,
      rows.length === 0
        ? h('p', { class: 'note' }, 'No failed deliveries.')
        : table(null, ['Failed', 'Event', 'Endpoint', 'Attempts', 'Last error', 'Delivery', ''], rows),
    ]
  })
}

function showDeadLetters(notice) {
  return into(byId('dead-letters-view'), async () => {
    const { deadLetters } = await post('/v1/usage/dead-letters/list', { limit: 100 })
    const rows = deadLetters.map((d) => [
      time(d.atMs),
      String(d.events),
      d.customerIds.join(', '),
      `${time(d.fromMs)} – ${time(d.toMs)}`,
      String(d.attempts),
      d.failedReason,
      h('code', {}, d.id),
      replayButton('/v1/usage/dead-letters/replay', { ids: [d.id] }, `Batch ${d.id}`, showDeadLetters),
    ])
    return [
      notice,
      rows.length === 0
        ? h('p', { class: 'note' }, 'No dead letters.')
        : table(null, ['Given up', 'Events', 'Customers', 'Timestamps', 'Attempts', 'Reason', 'Batch', ''], rows),
    ]
  })
}

/** A button that posts a replay, then reloads its list with a notice of what happened (or says why it failed). */
function replayButton(path, body, what, reload) {
  const button = h('button', { type: 'button', class: 'replay' }, 'Replay')
  const said = h('span', { class: 'status', role: 'status' })
  button.addEventListener('click', async () => {
    button.disabled = true
    try {
      const answer = await post(path, body)
      const text = answer.requeued.length > 0 ? `${what} was re-queued.` : `${what} was not found: already replayed?`
      reload(h('p', { class: 'ok', role: 'status' }, text))
    } catch (error) {
      said.textContent = describe(error)
      button.disabled = false
    }
  })
  return h('span', {}, button, ' ', said)
}

// ---------------------------------------------------------------------------------------------
// Keys: revoke by id, after a second, explicit confirmation.

function confirmRevoke(keyId) {
  const view = byId('revoke-view')
  const yes = h('button', { type: 'button', class: 'danger' }, `Revoke ${keyId} for good`)
  const no = h('button', { type: 'button' }, 'Cancel')
  no.addEventListener('click', () => view.replaceChildren())
  yes.addEventListener('click', () =>
    into(view, async () => {
      const answer = await post('/v1/keys/revoke', { keyId })
      return h('p', { class: 'ok', role: 'status' }, `Key ${answer.keyId} is revoked, with every key it created.`)
    }),
  )
  show(view, h('p', { role: 'alert' }, `Revoke key ${keyId} and every key it created? Requests with them will be refused.`), yes, ' ', no)
}

// ---------------------------------------------------------------------------------------------
// Wiring.

function on(id, event, handler) {
  byId(id).addEventListener(event, (e) => {
    if (event === 'submit') e.preventDefault()
    handler(e)
  })
}

function start() {
  on('sign-in-form', 'submit', async () => {
    const input = byId('api-key')
    const error = byId('sign-in-error')
    error.hidden = true
    try {
      await signIn(input.value.trim())
      input.value = ''
    } catch (e) {
      error.textContent = `The key was refused: ${describe(e)}`
      error.hidden = false
    }
  })
  on('sign-out', 'click', () => signOut())
  for (const button of document.querySelectorAll('[data-tab]')) button.addEventListener('click', () => openTab(button.dataset.tab))
  on('budget-form', 'submit', () => into(byId('budget-view'), () => showBudget(byId('budget-key').value.trim(), byId('budget-range').value)))
  on('customer-filter', 'submit', () => listCustomers(false))
  on('customers-more', 'click', () => listCustomers(true))
  on('webhooks-refresh', 'click', () => showWebhookFailures())
  on('dead-letters-refresh', 'click', () => showDeadLetters())
  on('revoke-form', 'submit', () => confirmRevoke(byId('revoke-key-id').value.trim()))
  const saved = sessionStorage.getItem(KEY_SLOT)
  if (saved) signIn(saved).catch((error) => signOut(error))
}

start()
