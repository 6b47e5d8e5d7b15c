import { Effect } from 'effect'
import { describe, expect, it } from 'vitest'
import {
  makeAnthropicProvider,
  makeOpenAIProvider,
  makeSecretSet,
  maskUrlCredentials,
  providerErrorFromStatus,
  providerErrorFromStreamCut,
  REDACTED,
  redactSecret,
  secretForms
} from '@agentvisor/core'

const KEY = 'sk-live/abc+def=123'

describe('secret redaction', () => {
  for (const [label, raw] of [
    ['a newline', `${KEY}\n`],
    ['a space', `${KEY} `],
    ['a tab', `${KEY}\t`],
    ['CRLF', `${KEY}\r\n`],
    ['nothing', KEY]
  ] as const) {
    it(`redacts a key ending in ${label} in every form it can be echoed in`, () => {
      const secrets = makeSecretSet([raw])
      const echoes = [
        `401 Incorrect API key provided: ${KEY}`,
        `Authorization: Bearer ${KEY}`,
        `x-api-key: ${raw}`,
        JSON.stringify({ error: { message: `bad key ${raw}` } }),
        JSON.stringify({ key: KEY }).replaceAll('/', '\\/'),
        `https://api.example/v1?key=${encodeURIComponent(KEY)}`,
        `https://api.example/v1?key=${encodeURIComponent(raw)}`,
        `key=${encodeURIComponent(KEY).replaceAll('%20', '+')}`,
        `key=${encodeURIComponent(KEY).replace(/%[0-9A-F]{2}/g, (hex) => hex.toLowerCase())}`
      ]
      for (const echo of echoes) {
        const redacted = secrets.redact(echo)
        expect(redacted, echo).toContain(REDACTED)
        expect(redacted).not.toContain(KEY)
        expect(redacted).not.toContain(raw.trim())
        expect(redacted).not.toContain(encodeURIComponent(KEY))
        expect(redacted).not.toContain(JSON.stringify(KEY).slice(1, -1))
      }
      expect(secrets.redact(`Bearer ${KEY}`)).toBe(`Bearer ${REDACTED}`)
    })
  }

  it('leaves text without a secret as it is, and values too short to be a key are never secrets', () => {
    const secrets = makeSecretSet(['abc', undefined, '   '])
    expect(secrets.isEmpty).toBe(true)
    expect(secrets.redact('abc def')).toBe('abc def')
    expect(secretForms('abc')).toEqual([])
  })

  it('replaces the longer of two overlapping keys whole', () => {
    const secrets = makeSecretSet(['sk-short', 'sk-short-and-longer'])
    expect(secrets.redact('a sk-short-and-longer b sk-short')).toBe(`a ${REDACTED} b ${REDACTED}`)
  })

  it('learns a key added later (a rotated key) without forgetting the first', () => {
    const secrets = makeSecretSet(['sk-first-key'])
    secrets.add('sk-second-key\n')
    expect(secrets.redact('sk-first-key sk-second-key')).toBe(`${REDACTED} ${REDACTED}`)
  })

  it('redacts a provider error message and the partial text of a cut stream', () => {
    const secrets = makeSecretSet([`${KEY}\n`])
    const status = providerErrorFromStatus('p', { status: 401, message: `401 Incorrect API key: Bearer ${KEY}` }, secrets)
    expect(status).toMatchObject({ kind: 'auth', message: `401 Incorrect API key: Bearer ${REDACTED}` })
    const cut = providerErrorFromStreamCut('p', new Error(`socket closed for ${KEY}`), `I saw ${KEY}`, secrets)
    expect(cut.partialText).toBe(`I saw ${REDACTED}`)
    expect(cut.message).not.toContain(KEY)
    expect(redactSecret(`key ${KEY}`, `${KEY} `)).toBe(`key ${REDACTED}`)
  })
})

describe('provider adapters', () => {
  for (const make of [makeOpenAIProvider, makeAnthropicProvider]) {
    it(`never quote a key that fetch rejects as a header value (${make.name})`, async () => {
      // fetch refuses a header value with a newline inside, and its message quotes the value.
      const key = 'sk-inner\nline-key-123'
      const provider = make({ name: 'p', model: 'm', baseUrl: 'http://127.0.0.1:9/v1', apiKey: key })
      const error = await Effect.runPromise(Effect.flip(provider.chat({ messages: [{ role: 'user', content: 'hi' }], tools: [] })))
      expect(error.message).not.toContain('sk-inner')
      expect(error.message).not.toContain('line-key-123')
    })
  }
})

describe('URL credentials', () => {
  it('masks the password of every URL in a text, and keeps the rest readable', () => {
    expect(maskUrlCredentials('cannot connect to NATS at nats://svc:s3cretpw@127.0.0.1:4222: CONNECTION_REFUSED')).toBe(
      'cannot connect to NATS at nats://svc:***@127.0.0.1:4222: CONNECTION_REFUSED'
    )
    expect(maskUrlCredentials('nats://a:pw1@h1:4222,nats://b:pw2@h2:4222')).toBe('nats://a:***@h1:4222,nats://b:***@h2:4222')
    expect(maskUrlCredentials('from nats://a:pw1@h1, nats://h2 (store postgres://app:pw3@db/runs)')).toBe(
      'from nats://a:***@h1, nats://h2 (store postgres://app:***@db/runs)'
    )
  })

  it('masks a NATS token, a password with raw reserved characters and a password= query parameter', () => {
    expect(maskUrlCredentials('nats://s3cretToken@10.0.0.5:4222')).toBe('nats://***@10.0.0.5:4222')
    expect(maskUrlCredentials('nats://svc:pa/ss@host:4222')).toBe('nats://svc:***@host:4222')
    expect(maskUrlCredentials('postgres://app:a@b:c@db/runs')).toBe('postgres://app:***@db/runs')
    expect(maskUrlCredentials('postgres://app@db/runs?password=s3cret&sslmode=require')).toBe('postgres://app@db/runs?password=***&sslmode=require')
  })

  it('leaves URLs without credentials, and a PostgreSQL user name, as they are', () => {
    for (const text of ['nats://127.0.0.1:4222', 'postgres://app@db/runs', 'postgres://app@/runs?host=/var/run/postgresql', 'no url here', 'http://h/p']) {
      expect(maskUrlCredentials(text)).toBe(text)
    }
  })
})
