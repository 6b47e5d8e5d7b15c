import { describe, expect, it } from 'vitest'
import { notify, type RunObserver } from '../src/driver/run-observer.js'

const transition = (seq: number) => ({ runId: 'run-1', seq, from: 'a', event: 'E', to: 'b', at: '2026-12-01T00:00:00.000Z' })

describe('notifying run observers', () => {
  it('reports an observer that throws once per observer and hook, with its error, and still calls the others', () => {
    const lines: string[] = []
    const seen: number[] = []
    const broken: RunObserver = {
      onTransition: () => {
        throw new Error('the dashboard is gone')
      },
      onFinished: () => {
        throw new Error('cannot print')
      }
    }
    const fine: RunObserver = { onTransition: (t) => void seen.push(t.seq) }
    const log = (line: string) => void lines.push(line)

    for (const seq of [1, 2, 3]) notify([broken, fine], 'onTransition', transition(seq), log)
    notify([broken, fine], 'onFinished', { runId: 'run-1', status: 'succeeded', steps: 1 }, log)
    notify([broken, fine], 'onFinished', { runId: 'run-1', status: 'succeeded', steps: 1 }, log)

    expect(seen).toEqual([1, 2, 3])
    expect(lines).toEqual([
      "a run observer's onTransition threw (reported once per observer and hook; the run goes on): the dashboard is gone",
      "a run observer's onFinished threw (reported once per observer and hook; the run goes on): cannot print"
    ])
  })
})
