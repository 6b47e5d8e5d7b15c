import { Either } from 'effect'
import { describe, expect, it } from 'vitest'
import { type Act, compilePolicy, describeDecision, escapeGlob, parseTaskContract, type PolicyLayer, type RememberedRule } from '@agentvisor/core'

const policyOf = (layers: ReadonlyArray<PolicyLayer>, remembered?: ReadonlyArray<RememberedRule>) => {
  const compiled = compilePolicy(layers, remembered)
  if (Either.isLeft(compiled)) throw new Error(`expected the policy to compile: ${compiled.left.message}`)
  return compiled.right
}

const errorOf = (layers: ReadonlyArray<PolicyLayer>, remembered?: ReadonlyArray<RememberedRule>) => {
  const compiled = compilePolicy(layers, remembered)
  if (Either.isRight(compiled)) throw new Error('expected a validation error')
  return compiled.left
}

/** The policy of the docs/task-file.md example. */
const contractLayers: ReadonlyArray<PolicyLayer> = [
  { name: 'base', deny: { write: ['secrets/**'] } },
  { name: 'team', allow: { read: ['**'], write: ['src/**'] }, ask: { exec: ['*'] } }
]

describe('policy precedence', () => {
  it("lets a base layer's deny on secrets/** beat a later layer's allow ** and names that rule and layer", () => {
    const policy = policyOf([
      { name: 'base', deny: { write: ['secrets/**'] } },
      { name: 'team', allow: { write: ['**'] } }
    ])
    expect(policy.check('write', 'secrets/key.txt')).toEqual({
      decision: 'deny',
      rule: 'secrets/**',
      layer: 'base',
      act: 'write',
      target: 'secrets/key.txt'
    })
    expect(policy.check('write', 'src/a.ts')).toMatchObject({ decision: 'allow', rule: '**', layer: 'team' })
  })

  it('lets a deny in a later layer beat an allow in an earlier one', () => {
    const policy = policyOf([
      { name: 'team', allow: { write: ['**'] } },
      { name: 'org', deny: { write: ['*.pem'] } }
    ])
    expect(policy.check('write', 'server.pem')).toMatchObject({ decision: 'deny', rule: '*.pem', layer: 'org' })
  })

  it('falls back to allow for read and ask for write and exec, with rule and layer "default"', () => {
    const policy = policyOf([])
    expect(policy.check('read', 'src/a.ts')).toMatchObject({ decision: 'allow', rule: 'default', layer: 'default', target: 'src/a.ts' })
    expect(policy.check('write', 'src/a.ts')).toMatchObject({ decision: 'ask', rule: 'default', layer: 'default' })
    expect(policy.check('exec', 'npm test')).toMatchObject({ decision: 'ask', rule: 'default', layer: 'default', target: 'npm test' })
  })

  it('lets ask beat allow across layers', () => {
    const policy = policyOf([
      { name: 'team', allow: { write: ['**'], exec: ['npm *'] } },
      { name: 'review', ask: { write: ['package.json'], exec: ['npm publish*'] } }
    ])
    expect(policy.check('write', 'package.json')).toMatchObject({ decision: 'ask', rule: 'package.json', layer: 'review' })
    expect(policy.check('write', 'src/a.ts')).toMatchObject({ decision: 'allow', layer: 'team' })
    expect(policy.check('exec', 'npm publish --tag next')).toMatchObject({ decision: 'ask', rule: 'npm publish*', layer: 'review' })
  })

  it('decides by the first matching rule of the winning tier in layer order', () => {
    const policy = policyOf([
      { name: 'a', deny: { write: ['*.key', 'id.*'] } },
      { name: 'b', deny: { write: ['**'] } }
    ])
    expect(policy.check('write', 'id.key')).toMatchObject({ decision: 'deny', rule: '*.key', layer: 'a' })
  })

  it('applies the contract example: secrets refused, src allowed, other writes and all commands asked', () => {
    const policy = policyOf(contractLayers)
    expect(policy.check('write', 'secrets/key.txt')).toMatchObject({ decision: 'deny', rule: 'secrets/**', layer: 'base' })
    expect(policy.check('write', 'src/main.ts')).toMatchObject({ decision: 'allow', rule: 'src/**', layer: 'team' })
    expect(policy.check('write', 'out.txt')).toMatchObject({ decision: 'ask', rule: 'default' })
    expect(policy.check('read', 'secrets/key.txt')).toMatchObject({ decision: 'allow', rule: '**', layer: 'team' })
    expect(policy.check('exec', 'ls')).toMatchObject({ decision: 'ask', rule: '*', layer: 'team' })
  })
})

describe('policy paths', () => {
  it('matches the normalised workspace-relative path, so ./ and .. cannot dodge a rule', () => {
    const policy = policyOf([{ name: 'base', deny: { write: ['secrets/**'] } }])
    for (const sneaky of ['./secrets/key.txt', 'src/../secrets/key.txt', 'secrets//key.txt', 'secrets/', 'secrets']) {
      expect(policy.check('write', sneaky), sneaky).toMatchObject({ decision: 'deny', rule: 'secrets/**' })
    }
    expect(policy.check('write', './a/../b')).toMatchObject({ target: 'b' })
  })

  it('refuses a path that leaves the workspace with rule "workspace" in layer "sandbox"', () => {
    const policy = policyOf([{ name: 'team', allow: { read: ['**'] } }])
    for (const outside of ['../x', '/etc/passwd', 'a/../../x', '..']) {
      expect(policy.check('read', outside), outside).toMatchObject({ decision: 'deny', rule: 'workspace', layer: 'sandbox', target: outside })
    }
  })

  it('keeps rules of one act from deciding another act', () => {
    const policy = policyOf([{ name: 'base', deny: { write: ['**'] } }])
    expect(policy.check('read', 'a.txt')).toMatchObject({ decision: 'allow', rule: 'default' })
  })
})

describe('policy commands', () => {
  it('denies `npm test && rm -rf /` when npm * is allowed and rm * denied', () => {
    const policy = policyOf([{ name: 'base', allow: { exec: ['npm *'] }, deny: { exec: ['rm *'] } }])
    expect(policy.check('exec', 'npm test && rm -rf /')).toMatchObject({
      decision: 'deny',
      rule: 'rm *',
      layer: 'base',
      target: 'npm test && rm -rf /',
      reason: 'segment "rm -rf /"'
    })
    expect(policy.check('exec', 'npm test')).toMatchObject({ decision: 'allow', rule: 'npm *', layer: 'base' })
  })

  it('asks for `ls | wc -l` when only ls* is allowed, because wc is not covered', () => {
    const policy = policyOf([{ name: 'base', allow: { exec: ['ls*'] } }])
    expect(policy.check('exec', 'ls | wc -l')).toMatchObject({
      decision: 'ask',
      rule: 'default',
      layer: 'default',
      reason: 'no rule covers segment "wc -l"'
    })
    expect(policy.check('exec', 'ls -la')).toMatchObject({ decision: 'allow', rule: 'ls*' })
  })

  it('asks for `echo hi > out.txt` although echo * is allowed, because redirections are never auto-allowed', () => {
    const policy = policyOf([{ name: 'base', allow: { exec: ['echo *'] } }])
    expect(policy.check('exec', 'echo hi > out.txt')).toMatchObject({ decision: 'ask', rule: 'redirection', layer: 'sandbox' })
    expect(policy.check('exec', 'echo hi')).toMatchObject({ decision: 'allow', rule: 'echo *' })
  })

  it('asks for `echo $(cat secret)` although both echo and cat are allowed', () => {
    const policy = policyOf([{ name: 'base', allow: { exec: ['echo *', 'cat *'] } }])
    expect(policy.check('exec', 'echo $(cat secret)')).toMatchObject({ decision: 'ask', rule: 'command-substitution', layer: 'sandbox' })
  })

  it('denies a command substitution whose inner command is denied', () => {
    const policy = policyOf([{ name: 'base', allow: { exec: ['echo *'] }, deny: { exec: ['cat secrets/*'] } }])
    expect(policy.check('exec', 'echo "$(cat secrets/key)"')).toMatchObject({ decision: 'deny', rule: 'cat secrets/*' })
  })

  it('never lets a risky construct lower a deny', () => {
    const policy = policyOf([{ name: 'base', deny: { exec: ['rm *'] } }])
    expect(policy.check('exec', 'rm -rf build > log.txt')).toMatchObject({ decision: 'deny', rule: 'rm *', layer: 'base' })
  })

  it('keeps a quoted `echo "a && b"` as one allowed segment', () => {
    const policy = policyOf([{ name: 'base', allow: { exec: ['echo *'] } }])
    const explanation = policy.explain('exec', 'echo "a && b"')
    expect(explanation.segments.map((verdict) => verdict.segment)).toEqual(['echo "a && b"'])
    expect(explanation.decision).toMatchObject({ decision: 'allow', rule: 'echo *' })
  })

  it('does not treat 2>&1 as risky', () => {
    const policy = policyOf([{ name: 'base', allow: { exec: ['npm *'] } }])
    expect(policy.check('exec', 'npm test 2>&1')).toMatchObject({ decision: 'allow', rule: 'npm *' })
  })

  it('asks for a backgrounded, subshelled or unparsable command that the rules would allow', () => {
    const policy = policyOf([{ name: 'base', allow: { exec: ['*'] } }])
    expect(policy.check('exec', 'sleep 100 &')).toMatchObject({ decision: 'ask', rule: 'background', layer: 'sandbox' })
    expect(policy.check('exec', '(cd a && make)')).toMatchObject({ decision: 'ask', rule: 'subshell', layer: 'sandbox' })
    expect(policy.check('exec', 'echo "oops')).toMatchObject({ decision: 'ask', rule: 'unparsed', layer: 'sandbox' })
  })

  it('denies an empty command with a reason', () => {
    const policy = policyOf([{ name: 'base', allow: { exec: ['*'] } }])
    for (const empty of ['', '   ', '# just a comment', ';']) {
      expect(policy.check('exec', empty), JSON.stringify(empty)).toMatchObject({
        decision: 'deny',
        rule: 'empty-command',
        layer: 'sandbox',
        reason: 'the command is empty'
      })
    }
  })

  it('lets a deny see through assignments, keywords, quoting and paths, while an allow must match as written', () => {
    const policy = policyOf([{ name: 'base', allow: { exec: ['*'] }, deny: { exec: ['rm *'] } }])
    for (const disguised of ['FOO=1 rm -rf /', "'r'm -rf /", '/bin/rm -rf /', 'for f in *; do rm $f; done']) {
      expect(policy.check('exec', disguised), disguised).toMatchObject({ decision: 'deny', rule: 'rm *' })
    }
    const allowOnly = policyOf([{ name: 'base', allow: { exec: ['npm *'] } }])
    expect(allowOnly.check('exec', 'LD_PRELOAD=./evil.so npm test')).toMatchObject({ decision: 'ask', rule: 'default' })
  })
})

describe('remembered decisions', () => {
  it('lets a remembered allow beat the default ask but never a deny rule', () => {
    const layers: ReadonlyArray<PolicyLayer> = [{ name: 'base', deny: { exec: ['rm *'] } }]
    const remembered: ReadonlyArray<RememberedRule> = [
      { act: 'exec', pattern: 'npm test', decision: 'allow' },
      { act: 'exec', pattern: 'rm -rf build', decision: 'allow' }
    ]
    const policy = policyOf(layers, remembered)
    expect(policy.check('exec', 'npm test')).toMatchObject({ decision: 'allow', rule: 'npm test', layer: 'remembered' })
    expect(policy.check('exec', 'rm -rf build')).toMatchObject({ decision: 'deny', rule: 'rm *', layer: 'base' })
    expect(policyOf(layers).check('exec', 'npm test')).toMatchObject({ decision: 'ask', rule: 'default' })
  })

  it('lets a remembered deny beat an allow rule', () => {
    const policy = policyOf([{ name: 'team', allow: { write: ['**'] } }], [{ act: 'write', pattern: 'package.json', decision: 'deny' }])
    expect(policy.check('write', 'package.json')).toMatchObject({ decision: 'deny', rule: 'package.json', layer: 'remembered' })
    expect(policy.check('write', 'src/a.ts')).toMatchObject({ decision: 'allow', layer: 'team' })
  })

  it('evaluates remembered rules as the last layer', () => {
    const policy = policyOf(contractLayers, [{ act: 'read', pattern: '**', decision: 'allow' }])
    expect(policy.layers).toEqual(['base', 'team', 'remembered'])
  })

  it('matches an escaped remembered target literally', () => {
    const policy = policyOf([], [{ act: 'exec', pattern: escapeGlob('ls *.txt'), decision: 'allow' }])
    expect(policy.check('exec', 'ls *.txt')).toMatchObject({ decision: 'allow', layer: 'remembered' })
    expect(policy.check('exec', 'ls secrets.txt')).toMatchObject({ decision: 'ask', rule: 'default' })
  })

  it('names the remembered entry whose glob is invalid', () => {
    const error = errorOf([], [{ act: 'write', pattern: 'a[', decision: 'allow' }])
    expect(error.field).toBe('remembered.0.pattern')
  })
})

describe('policy explanations', () => {
  const layers: ReadonlyArray<PolicyLayer> = [
    { name: 'base', deny: { write: ['secrets/**'], exec: ['rm *'] } },
    { name: 'team', allow: { write: ['**', 'secrets/public/**'], exec: ['npm *', '*'] }, ask: { write: ['secrets/*'] } }
  ]
  const policy = policyOf(layers, [{ act: 'write', pattern: 'secrets/**', decision: 'allow' }])

  it('lists every matching rule in evaluation order next to the decision', () => {
    const explanation = policy.explain('write', 'secrets/public/a.txt')
    expect(explanation.decision).toMatchObject({ decision: 'deny', rule: 'secrets/**', layer: 'base' })
    expect(explanation.matches).toEqual([
      { tier: 'deny', rule: 'secrets/**', layer: 'base' },
      { tier: 'allow', rule: '**', layer: 'team' },
      { tier: 'allow', rule: 'secrets/public/**', layer: 'team' },
      { tier: 'allow', rule: 'secrets/**', layer: 'remembered' }
    ])
  })

  it('explains a command segment by segment', () => {
    const explanation = policy.explain('exec', 'npm test && rm -rf dist')
    expect(explanation.segments).toEqual([
      { segment: 'npm test', decision: 'allow', rule: 'npm *', layer: 'team' },
      { segment: 'rm -rf dist', decision: 'deny', rule: 'rm *', layer: 'base' }
    ])
    expect(explanation.matches).toEqual([
      { tier: 'allow', rule: 'npm *', layer: 'team', segment: 'npm test' },
      { tier: 'allow', rule: '*', layer: 'team', segment: 'npm test' },
      { tier: 'deny', rule: 'rm *', layer: 'base', segment: 'rm -rf dist' },
      { tier: 'allow', rule: '*', layer: 'team', segment: 'rm -rf dist' }
    ])
  })

  it('always returns the same decision from check and explain', () => {
    const probes: ReadonlyArray<readonly [Act, string]> = [
      ['write', 'secrets/a'],
      ['write', 'secrets/public/a'],
      ['write', 'src/a.ts'],
      ['read', 'x'],
      ['read', '../x'],
      ['exec', 'npm test'],
      ['exec', 'rm -rf /'],
      ['exec', 'echo hi > f'],
      ['exec', ''],
      ['exec', 'ls | wc']
    ]
    for (const [act, target] of probes) {
      expect(policy.check(act, target), `${act} ${target}`).toEqual(policy.explain(act, target).decision)
    }
  })
})

describe('policy validation', () => {
  it('names the field of an invalid glob', () => {
    const error = errorOf([
      { name: 'base', deny: { write: ['secrets/**'] } },
      { name: 'team', deny: { write: ['ok/**', 'src/{a,b'] } }
    ])
    expect(error._tag).toBe('ContractError')
    expect(error.field).toBe('policy.layers.1.deny.write.1')
    expect(error.message).toMatch(/^policy\.layers\.1\.deny\.write\.1: invalid glob "src\/\{a,b": unbalanced "\{"/)
  })

  it('refuses duplicate layer names', () => {
    const error = errorOf([{ name: 'base' }, { name: 'team' }, { name: 'base' }])
    expect(error.field).toBe('policy.layers.2.name')
    expect(error.message).toContain('duplicates layer name "base"')
  })

  it('refuses the layer names the engine attributes its own decisions to', () => {
    for (const reserved of ['default', 'sandbox', 'remembered']) {
      expect(errorOf([{ name: reserved }]).message, reserved).toContain('is reserved')
    }
  })

  it('compiles the policy of a parsed task contract', () => {
    const contract = Either.getOrThrow(
      parseTaskContract({ goal: 'g', workspace: 'ws', providers: [{ name: 'p', kind: 'scripted', steps: [] }], policy: { layers: contractLayers } }, '/base')
    )
    expect(Either.isRight(compilePolicy(contract.policy.layers))).toBe(true)
  })
})

describe('describeDecision', () => {
  it('names the act, target, rule and layer in one line', () => {
    const policy = policyOf(contractLayers)
    expect(describeDecision(policy.check('write', 'secrets/key.txt'))).toBe('write secrets/key.txt refused by rule "secrets/**" in layer "base"')
    expect(describeDecision(policy.check('read', 'a.txt'))).toBe('read a.txt allowed by rule "**" in layer "team"')
    expect(describeDecision(policyOf([]).check('exec', 'ls\nrm x'))).toBe(
      'exec "ls\\nrm x" needs approval under rule "default" in layer "default" (no rule covers segment "ls")'
    )
  })
})

describe('policy for tools by name', () => {
  it('matches tool globs against tool names, deny beating allow across layers', () => {
    const policy = policyOf([
      { name: 'base', deny: { tool: ['docs__delete_*'] } },
      { name: 'team', allow: { tool: ['docs__*'] } }
    ])
    expect(policy.check('tool', 'docs__search')).toMatchObject({ decision: 'allow', rule: 'docs__*', layer: 'team' })
    expect(policy.check('tool', 'docs__delete_page')).toMatchObject({ decision: 'deny', rule: 'docs__delete_*', layer: 'base' })
  })

  it("gives an uncovered tool the answer of its effect class: allow for read, ask otherwise, under rule and layer 'default'", () => {
    const policy = policyOf([{ name: 'team', allow: { tool: ['docs__*'] } }])
    expect(policy.check('tool', 'lookup_ticket', 'allow')).toMatchObject({ decision: 'allow', rule: 'default', layer: 'default' })
    expect(policy.check('tool', 'append_line')).toMatchObject({ decision: 'ask', rule: 'default', layer: 'default' })
    expect(describeDecision(policy.check('tool', 'append_line'))).toBe(
      'tool append_line needs approval under rule "default" in layer "default" (no rule covers this tool)'
    )
  })

  it('keeps tool rules from deciding file acts and file rules from deciding tools', () => {
    const policy = policyOf([{ name: 'team', deny: { tool: ['*'] }, allow: { write: ['**'] } }])
    expect(policy.check('write', 'a.txt').decision).toBe('allow')
    expect(policy.check('tool', 'write_file', 'allow').decision).toBe('deny')
  })
})
