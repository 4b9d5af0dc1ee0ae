import type { CardForm } from './cards.js'

/** Escapes text for HTML element content and double-quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`=]/g, (c) => `&#${c.charCodeAt(0)};`)
}

const STYLE = `body{font-family:system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem;color:#222}
label{display:block;margin:.8rem 0 .2rem}input{width:100%;padding:.4rem;box-sizing:border-box}
.row{display:flex;gap:.6rem}.row>div{flex:1}.error{color:#b00020;font-size:.9rem}
.banner{background:#fdecea;border:1px solid #b00020;padding:.6rem;margin:1rem 0}
.actions{display:flex;gap:.6rem;margin-top:1.2rem}button{padding:.5rem 1rem}.note{color:#666;font-size:.9rem}`

function layout(title: string, body: string): string {
  return (
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">` +
    `<title>${escapeHtml(title)}</title><style>${STYLE}</style></head><body>${body}</body></html>`
  )
}

/** The card form; `values` refill it after a refused submission (never the number or CVC). */
export function setupFormPage(options: {
  action: string
  customerId: string
  values?: Partial<CardForm>
  errors?: Partial<Record<keyof CardForm, string>>
}): string {
  const { values = {}, errors = {} } = options
  const field = (name: keyof CardForm, label: string, attrs: string, value = '') => {
    const error = errors[name]
    return (
      `<label for="${name}">${escapeHtml(label)}</label>` +
      `<input id="${name}" name="${name}" value="${escapeHtml(value)}" ${attrs}${error ? ` aria-invalid="true" aria-describedby="${name}-error"` : ''}>` +
      (error ? `<div class="error" id="${name}-error">${escapeHtml(error)}</div>` : '')
    )
  }
  const banner = Object.keys(errors).length > 0 ? `<div class="banner" role="alert">The card was not added: correct the fields below.</div>` : ''
  return layout(
    'Add a test card',
    `<h1>Add a test card</h1>
<p class="note">Sandbox payment provider for customer <strong>${escapeHtml(options.customerId)}</strong>. Only test card numbers are accepted, such as 4242 4242 4242 4242; no real payment is made.</p>
${banner}<form method="post" action="${escapeHtml(options.action)}" autocomplete="off">
${field('name', 'Name on card', 'autocomplete="cc-name" maxlength="100" required', values.name)}
${field('number', 'Card number', 'inputmode="numeric" autocomplete="cc-number" maxlength="23" placeholder="4242 4242 4242 4242" required')}
<div class="row"><div>${field('expMonth', 'Expiry month', 'inputmode="numeric" maxlength="2" placeholder="MM" required', values.expMonth)}</div>
<div>${field('expYear', 'Expiry year', 'inputmode="numeric" maxlength="4" placeholder="YYYY" required', values.expYear)}</div>
<div>${field('cvc', 'CVC', 'inputmode="numeric" maxlength="4" autocomplete="cc-csc" required')}</div></div>
<div class="actions"><button type="submit" name="action" value="add">Add card</button>
<button type="submit" name="action" value="cancel" formnovalidate>Cancel</button></div>
</form>`,
  )
}

export function messagePage(title: string, message: string): string {
  return layout(title, `<h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p>`)
}
