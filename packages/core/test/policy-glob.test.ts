import { Either } from 'effect'
import { describe, expect, it } from 'vitest'
import { compileGlob, escapeGlob, type GlobMode } from '@agentvisor/core'

const matcher = (pattern: string, mode: GlobMode) => {
  const compiled = compileGlob(pattern, mode)
  if (Either.isLeft(compiled)) throw new Error(`expected ${pattern} to compile: ${compiled.left.message}`)
  return compiled.right
}

/** Asserts which subjects a glob matches and which it does not, so each rule is seen from both sides. */
const expectMatches = (pattern: string, mode: GlobMode, yes: ReadonlyArray<string>, no: ReadonlyArray<string>) => {
  const matches = matcher(pattern, mode)
  expect(
    yes.filter((subject) => !matches(subject)),
    `${pattern} should match`
  ).toEqual([])
  expect(
    no.filter((subject) => matches(subject)),
    `${pattern} should not match`
  ).toEqual([])
}

const syntaxErrorOf = (pattern: string, mode: GlobMode) => {
  const compiled = compileGlob(pattern, mode)
  if (Either.isRight(compiled)) throw new Error(`expected ${pattern} to be refused`)
  return compiled.left
}

describe('path globs', () => {
  it('keeps * and ? within one path segment', () => {
    expectMatches('src/*.ts', 'path', ['src/a.ts', 'src/.hidden.ts'], ['src/x/a.ts', 'a.ts', 'src/a.tsx'])
    expectMatches('a?c', 'path', ['abc', 'a.c'], ['a/c', 'ac', 'abbc'])
  })

  it('lets ** span any depth, including none', () => {
    expectMatches('secrets/**', 'path', ['secrets', 'secrets/a', 'secrets/a/b', 'secrets/.env'], ['secretsx', 'other/secrets/a', 'secret'])
    expectMatches('**/*.ts', 'path', ['a.ts', 'x/y/a.ts'], ['a.js', 'x/a.tsx'])
    expectMatches('a/**/b', 'path', ['a/b', 'a/x/b', 'a/x/y/b'], ['ab', 'a/xb', 'b'])
    expectMatches('**', 'path', ['.', 'a', 'a/b/c', '.git/config'], [])
  })

  it('treats ** inside a name like a single *', () => {
    expectMatches('a**b', 'path', ['ab', 'axxb'], ['a/b', 'ax/yb'])
  })

  it('supports {a,b} alternation, nested and spanning folders', () => {
    expectMatches('*.{ts,js}', 'path', ['a.ts', 'a.js'], ['a.tsx', 'a.md', 'x/a.ts'])
    expectMatches('{src/**,docs/{a,b}.md}', 'path', ['src', 'src/x/y.ts', 'docs/a.md', 'docs/b.md'], ['docs/c.md', 'lib/a.ts'])
  })

  it('supports character classes, ranges and negation but never matches the separator', () => {
    expectMatches('log[0-9].txt', 'path', ['log1.txt', 'log9.txt'], ['logx.txt', 'log10.txt'])
    expectMatches('[!a]b', 'path', ['xb', '.b'], ['ab', '/b'])
    expectMatches('a[/]b', 'path', [], ['a/b'])
    expectMatches('[]]x', 'path', [']x'], ['x'])
  })

  it('treats escaped metacharacters literally', () => {
    expectMatches('a\\*b', 'path', ['a*b'], ['axb'])
    expectMatches(escapeGlob('weird[1]{x}*?.txt'), 'path', ['weird[1]{x}*?.txt'], ['weird1x.txt'])
  })

  it('drops a leading ./ and reads a trailing / as the folder and everything below it', () => {
    expectMatches('./src/*.ts', 'path', ['src/a.ts'], ['./src/a.ts'])
    expectMatches('build/', 'path', ['build', 'build/x/y'], ['buildx'])
  })

  it('is case-sensitive and anchored at both ends', () => {
    expectMatches('src/a.ts', 'path', ['src/a.ts'], ['SRC/a.ts', 'x/src/a.ts', 'src/a.ts.bak'])
  })

  it('refuses unbalanced braces and brackets, naming the problem', () => {
    expect(syntaxErrorOf('src/{a,b', 'path').message).toContain('unbalanced "{"')
    expect(syntaxErrorOf('log[0-9.txt', 'path').message).toContain('unbalanced "["')
  })

  it('refuses globs that can never name a workspace path', () => {
    expect(syntaxErrorOf('/etc/**', 'path').message).toContain('workspace-relative')
    expect(syntaxErrorOf('../x', 'path').message).toContain('".."')
    expect(syntaxErrorOf('', 'path').message).toContain('empty')
    expect(syntaxErrorOf('a\\', 'path').message).toContain('dangling')
  })

  it('refuses a reversed range instead of compiling a regex that throws later', () => {
    expect(syntaxErrorOf('[z-a]', 'path').pattern).toBe('[z-a]')
  })
})

describe('command globs', () => {
  it('lets * match any characters, spaces and slashes included', () => {
    expectMatches('npm *', 'command', ['npm test', 'npm run build -- --out=dist/x'], ['npx test', 'pnpm test'])
    expectMatches('cat */secret', 'command', ['cat a b/c/secret'], ['cat secret.txt'])
  })

  it('lets a trailing " *" also match the bare command', () => {
    expectMatches('git push *', 'command', ['git push', 'git push origin main'], ['git pushx', 'git pull'])
  })

  it('lets ? match exactly one character', () => {
    expectMatches('ls -?', 'command', ['ls -l', 'ls -a'], ['ls -la', 'ls'])
  })

  it('compares with blanks trimmed and collapsed on both sides', () => {
    expectMatches('  npm   run  * ', 'command', ['npm run build', '  npm \t run   build  '], ['npm runbuild'])
  })

  it('treats brackets and braces as ordinary command text', () => {
    expectMatches('[ -f *', 'command', ['[ -f x ]'], ['test -f x'])
    expectMatches("awk '{print}' *", 'command', ["awk '{print}' a.txt"], ["awk '{print $1}' a.txt"])
  })

  it('refuses an empty command glob', () => {
    expect(syntaxErrorOf('   ', 'command').message).toContain('empty')
  })
})
