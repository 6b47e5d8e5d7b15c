import { describe, expect, it } from 'vitest'
import { natsUrlAuth } from '../src/bus/nats-url-auth.js'

describe('credentials in NATS server URLs', () => {
  it('reads a user and a percent-encoded password, and hands the URL on without them', () => {
    expect(natsUrlAuth('nats://svc:p%40ss%2Fw@10.0.0.5:4222')).toEqual({ servers: ['nats://10.0.0.5:4222'], user: 'svc', pass: 'p@ss/w' })
  })

  it('reads a bare user-info as a token, and a raw @ as part of the password', () => {
    expect(natsUrlAuth('nats://s3cretToken@h:4222')).toEqual({ servers: ['nats://h:4222'], token: 's3cretToken' })
    expect(natsUrlAuth('nats://svc:a@b@h:4222')).toEqual({ servers: ['nats://h:4222'], user: 'svc', pass: 'a@b' })
  })

  it('takes the first credentials of a cluster list and strips them from every URL', () => {
    expect(natsUrlAuth(['nats://h1:4222', 'nats://a:one@h2:4222', 'nats://b:two@h3:4222'])).toEqual({
      servers: ['nats://h1:4222', 'nats://h2:4222', 'nats://h3:4222'],
      user: 'a',
      pass: 'one'
    })
  })

  it('leaves URLs without user-info as they are, with no credentials', () => {
    expect(natsUrlAuth(['nats://127.0.0.1:4222', '127.0.0.1:4223'])).toEqual({ servers: ['nats://127.0.0.1:4222', '127.0.0.1:4223'] })
  })
})
