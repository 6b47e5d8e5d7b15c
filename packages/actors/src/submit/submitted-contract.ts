import * as path from 'node:path'
import { compileGlob, DEFAULT_AGENT_TOOLS, DEFAULT_CHILD_LIMITS, GlobMode, parseTaskContract, type TaskContract, quoteName } from '@agentvisor/core'
import { Either } from 'effect'
import { checkVerifyCommands, firstAllowingLayer, isInside, limitsAbove, numbersAbove, same } from '../protocol/child-contract.js'

const WHOSE = "the worker's submit template's"

/**
 * The fields a submission may set freely: what the run is for and how its agent speaks. None of
 * them lets a run do anything its policy, workspace and tools would not (docs/nats.md, "Submitting
 * runs").
 */
const FREE: ReadonlySet<string> = new Set(['goal', 'verify', 'instructions', 'model', 'output'])

/** The fields a submission may narrow (each checked below); every other one must be the template's. */
const BOUNDED: ReadonlySet<string> = new Set(['workspace', 'limits', 'children', 'policy', 'approval', 'tools', 'delegates'])

/** Whether `pattern` names one tool (no glob syntax): a submission names tools, it does not match them. */
const isPlainName = (pattern: string): boolean => !/[*?[\]{}!]/.test(pattern)

type Fields = Readonly<Record<string, unknown>>

const isObject = (value: unknown): value is Fields => typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * The task a submission asks for, laid over the template: its own fields win, `limits` and
 * `children` key by key, its `workspace` resolves inside the template's, its policy layers come
 * after the template's. What it leaves out is the template's.
 */
const overlay = (template: TaskContract, submission: Fields): Fields => {
  const { goal: _goal, agent: _agent, startedWithTools: _tools, ...given } = template as unknown as Fields
  const workspace = submission['workspace']
  const layers = isObject(submission['policy']) ? submission['policy']['layers'] : undefined
  return {
    ...given,
    ...submission,
    ...(typeof workspace === 'string' ? { workspace: path.resolve(template.workspace, workspace) } : {}),
    ...(isObject(submission['limits']) ? { limits: { ...template.limits, ...submission['limits'] } } : {}),
    ...(isObject(submission['children']) ? { children: { ...(template.children ?? DEFAULT_CHILD_LIMITS), ...submission['children'] } } : {}),
    ...(Array.isArray(layers) && Object.keys(submission['policy'] as Fields).length === 1 ? { policy: { layers: [...template.policy.layers, ...layers] } } : {})
  }
}

/** Why `asked`'s tools or delegates would give its agent more than the template's, or undefined. */
const widerAgent = (template: TaskContract, asked: TaskContract): string | undefined => {
  if (asked.tools !== undefined && !same(asked.tools, template.tools)) {
    const patterns = (template.tools ?? DEFAULT_AGENT_TOOLS)
      .map((pattern) => compileGlob(pattern, GlobMode.path))
      .flatMap((glob) => (Either.isRight(glob) ? [glob.right] : []))
    for (const [i, name] of asked.tools.entries()) {
      if (!isPlainName(name)) return `tools.${i}: ${quoteName(name)} is a pattern: a submitted run names each of its tools`
      if (!patterns.some((matches) => matches(name))) return `tools.${i}: ${quoteName(name)} is not among ${WHOSE} tools`
    }
  }
  const delegates = template.delegates ?? []
  const extra = (asked.delegates ?? []).find((name) => !delegates.includes(name))
  if (extra !== undefined) return `delegates: ${quoteName(extra)} is not among ${WHOSE} delegates`
  return undefined
}

/** Why `asked` (validated, laid over `template`) would do more than the template allows, or undefined. */
const widening = (template: TaskContract, asked: TaskContract): string | undefined => {
  for (const key of new Set([...Object.keys(asked), ...Object.keys(template)])) {
    if (FREE.has(key) || BOUNDED.has(key)) continue
    if (same((asked as unknown as Fields)[key], (template as unknown as Fields)[key])) continue
    if (key === 'providers') return `providers: a submitted run uses ${WHOSE} providers (leave the field out)`
    return `${key}: differs from ${WHOSE} (leave the field out)`
  }
  if (!isInside(template.workspace, asked.workspace)) return `workspace: ${asked.workspace} is not inside ${WHOSE} workspace ${template.workspace}`
  const limits =
    limitsAbove(asked.limits, template.limits, WHOSE) ??
    numbersAbove('children', asked.children ?? DEFAULT_CHILD_LIMITS, template.children ?? DEFAULT_CHILD_LIMITS, WHOSE)
  if (limits !== undefined) return limits
  if (asked.approval === 'auto' && template.approval !== 'auto') return `approval: "auto" is weaker than ${WHOSE} "${template.approval}"`
  const inherited = template.policy.layers
  if (!same(asked.policy.layers.slice(0, inherited.length), inherited)) return `policy.layers: must keep ${WHOSE} layers`
  const widened = firstAllowingLayer(asked.policy.layers, inherited.length)
  if (widened !== -1) return `policy.layers.${widened - inherited.length}.allow: a submitted run may only add ask and deny rules to ${WHOSE} policy`
  return widerAgent(template, asked)
}

/**
 * The contract of a run submitted over NATS (`agentvisor.runs.submit`, docs/nats.md): the
 * submission is a task file's content, laid over the worker's submit template and validated as a
 * task is. It may set its goal, verify, instructions, model settings and output; narrow the
 * workspace (a folder inside the template's), limits, children caps, tools, delegates and
 * approval; and add ask and deny policy layers. Anything else must be the template's (or left
 * out): providers, agents, tool modules, MCP servers, sandbox, pricing. Left: a one-line reason
 * naming the field.
 */
export const narrowSubmission = (template: TaskContract, submission: unknown): Either.Either<TaskContract, string> => {
  if (!isObject(submission)) return Either.left('contract: must be a task (a JSON object)')
  const parsed = parseTaskContract(overlay(template, submission), template.workspace)
  if (Either.isLeft(parsed)) return Either.left(parsed.left.message)
  const asked = parsed.right
  const widened = widening(template, asked)
  if (widened !== undefined) return Either.left(widened)
  const verified = checkVerifyCommands(template, asked.verify, WHOSE, 'a submitted run')
  if (Either.isLeft(verified)) return Either.left(verified.left)
  // Nobody sits at a worker's terminal: an ask waits for `approve` instead.
  return Either.right(asked.approval === 'prompt' ? { ...asked, approval: 'defer' } : asked)
}
