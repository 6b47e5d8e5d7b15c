import { describe, expect, it } from 'vitest'
import { insertRun, insertStep, lastStepText, listSteps, setStepFeedback, setStepResults } from '@agentvisor/store'
import { DIALECTS, run, step, tempStore } from './support/temp-store.js'
import { runCall } from '../../../test/support/run-call.js'

describe.each(DIALECTS)('steps repository on %s', (dialect) => {
  it('round-trips a step, defaulting text and tool calls to empty, results to null and tokens to 0', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(insertStep(db, step()))
    expect(await runCall(listSteps(db, 'run-1'))).toEqual([
      {
        ...step(),
        prompt_summary: '',
        text: '',
        tool_calls: [],
        results: null,
        feedback: null,
        tokens_in: 0,
        tokens_out: 0
      }
    ])
  })

  it('records the tool results of a step once its tools ran', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    const toolCalls = [{ id: 'call_1', name: 'write_file', arguments: '{"path":"out.txt","content":"DONE"}' }]
    await runCall(insertStep(db, step({ text: 'writing', tool_calls_json: JSON.stringify(toolCalls), tokens_in: 12, tokens_out: 6 })))

    const results = [{ toolCallId: 'call_1', name: 'write_file', ok: true, output: 'wrote out.txt' }]
    expect(await runCall(setStepResults(db, 'run-1', 1, JSON.stringify(results)))).toBe(true)
    const [stored] = await runCall(listSteps(db, 'run-1'))
    expect(stored).toMatchObject({ text: 'writing', tool_calls: toolCalls, results, tokens_in: 12, tokens_out: 6 })
    expect(await runCall(setStepResults(db, 'run-1', 9, '[]'))).toBe(false)
  })

  it('records the verification feedback given to the model after a step', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(insertStep(db, step()))
    expect(await runCall(setStepFeedback(db, 'run-1', 1, 'The goal is not reached yet'))).toBe(true)
    expect((await runCall(listSteps(db, 'run-1')))[0]!.feedback).toBe('The goal is not reached yet')
    expect(await runCall(setStepFeedback(db, 'run-1', 9, 'x'))).toBe(false)
  })

  it("reads a run's last step that answered with text as it was written, and nothing for a run without one", async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(insertRun(db, run({ id: 'run-2' })))
    const odd = 'last \u0000 \u0010 \ud800 answer'
    await runCall(insertStep(db, step({ step: 1, text: 'first' })))
    await runCall(insertStep(db, step({ step: 2, text: odd })))
    await runCall(insertStep(db, step({ step: 3, text: '' })))
    await runCall(insertStep(db, step({ run_id: 'run-2', step: 1, text: '' })))
    expect(await runCall(lastStepText(db, 'run-1'))).toBe(odd)
    expect(await runCall(lastStepText(db, 'run-2'))).toBeUndefined()
    expect(await runCall(lastStepText(db, 'ghost'))).toBeUndefined()
  })

  it("lists a run's steps in step order", async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(insertStep(db, step({ step: 2 })))
    await runCall(insertStep(db, step({ step: 1 })))
    expect((await runCall(listSteps(db, 'run-1'))).map((row) => row.step)).toEqual([1, 2])
  })

  it('rejects a step number the run already has, and a step of an unknown run', async () => {
    const { db } = await tempStore(dialect)
    await runCall(insertRun(db, run()))
    await runCall(insertStep(db, step()))
    await expect(runCall(insertStep(db, step({ provider: 'secondary' })))).rejects.toThrow(/UNIQUE|PRIMARY KEY/i)
    await expect(runCall(insertStep(db, step({ run_id: 'ghost' })))).rejects.toThrow(/FOREIGN KEY/i)
    expect(await runCall(listSteps(db, 'run-1'))).toMatchObject([{ provider: 'primary' }])
  })
})
