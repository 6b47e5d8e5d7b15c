import { describe, expect, it } from 'vitest'
import { analyzeCommand, commandReadings, dequoteShellWord } from '@agentvisor/core'

const kinds = (command: string) => analyzeCommand(command).risky.map((risk) => risk.kind)

describe('command-line analysis', () => {
  it('splits on &&, ||, ;, |, & and newlines', () => {
    expect(analyzeCommand('a && b || c; d | e & f\ng').segments).toEqual(['a', 'b', 'c', 'd', 'e', 'f', 'g'])
  })

  it('keeps separators inside single quotes, double quotes and escapes in one segment', () => {
    expect(analyzeCommand('echo "a && b"').segments).toEqual(['echo "a && b"'])
    expect(analyzeCommand("echo 'a | b; c'").segments).toEqual(["echo 'a | b; c'"])
    expect(analyzeCommand('echo a \\&\\& b').segments).toEqual(['echo a \\&\\& b'])
    expect(analyzeCommand("echo $'it\\'s; ok'").segments).toEqual(["echo $'it\\'s; ok'"])
    expect(analyzeCommand('echo ${x//;/,}').segments).toEqual(['echo ${x//;/,}'])
    expect(analyzeCommand('echo "a && b"').risky).toEqual([])
  })

  it('keeps leading variable assignments in the segment', () => {
    expect(analyzeCommand('FOO=1 BAR="x y" npm test').segments).toEqual(['FOO=1 BAR="x y" npm test'])
  })

  it('does not treat descriptor duplication or /dev/null as a risky redirection', () => {
    expect(analyzeCommand('npm test 2>&1 | tee log.txt')).toEqual({ segments: ['npm test 2>&1', 'tee log.txt'], risky: [] })
    expect(kinds('echo oops >&2')).toEqual([])
    expect(kinds('cmd >/dev/null 2>&1')).toEqual([])
    expect(kinds('cmd 2> /dev/null <&-')).toEqual([])
  })

  it('reports every redirection to or from a file', () => {
    expect(analyzeCommand('echo hi > out.txt').risky).toEqual([{ kind: 'redirection', text: '> out.txt' }])
    expect(analyzeCommand('echo hi >>log').risky).toEqual([{ kind: 'redirection', text: '>>log' }])
    expect(analyzeCommand('cmd 2>err.log').risky).toEqual([{ kind: 'redirection', text: '2>err.log' }])
    expect(analyzeCommand('wc -l < secrets/key').risky).toEqual([{ kind: 'redirection', text: '< secrets/key' }])
    expect(analyzeCommand('cmd >| f').risky).toEqual([{ kind: 'redirection', text: '>| f' }])
    expect(analyzeCommand('cmd >&file').risky).toEqual([{ kind: 'redirection', text: '>&file' }])
  })

  it('reports &> as background too, since /bin/sh runs `cmd &>f` as `cmd &` then `>f`', () => {
    expect(kinds('cmd &>out.txt')).toEqual(['background', 'redirection'])
    expect(kinds('cmd &>/dev/null')).toEqual(['background'])
  })

  it('ignores redirection and substitution characters inside single quotes', () => {
    expect(kinds("echo '$(rm -rf /) > x `id`'")).toEqual([])
  })

  it('reports command substitution, also inside double quotes and backticks, and exposes the inner commands', () => {
    expect(analyzeCommand('echo $(cat secret)')).toEqual({
      segments: ['echo $(cat secret)', 'cat secret'],
      risky: [{ kind: 'command-substitution', text: '$(cat secret)' }]
    })
    expect(analyzeCommand('echo "x $(rm a) y"').segments).toEqual(['echo "x $(rm a) y"', 'rm a'])
    expect(analyzeCommand('echo "now: `date`"')).toEqual({
      segments: ['echo "now: `date`"', 'date'],
      risky: [{ kind: 'command-substitution', text: '`date`' }]
    })
  })

  it('reports process substitution and subshells and splits the commands inside them', () => {
    expect(analyzeCommand('diff <(ls a) >(wc -l)')).toEqual({
      segments: ['diff <(ls a) >(wc -l)', 'ls a', 'wc -l'],
      risky: [
        { kind: 'process-substitution', text: '<(ls a)' },
        { kind: 'process-substitution', text: '>(wc -l)' }
      ]
    })
    expect(analyzeCommand('(cd sub && rm -rf build)')).toEqual({
      segments: ['cd sub', 'rm -rf build'],
      risky: [{ kind: 'subshell', text: '(cd sub && rm -rf build)' }]
    })
  })

  it('reports a trailing & as background', () => {
    expect(analyzeCommand('sleep 100 &')).toEqual({ segments: ['sleep 100'], risky: [{ kind: 'background', text: 'sleep 100 &' }] })
  })

  it('marks unbalanced quotes and parentheses as unparsed and keeps the rest as a segment', () => {
    expect(analyzeCommand('ls && rm -rf "/ x')).toEqual({
      segments: ['ls', 'rm -rf "/ x'],
      risky: [{ kind: 'unparsed', text: '"/ x' }]
    })
    expect(kinds("echo 'open")).toEqual(['unparsed'])
    expect(kinds('echo $(ls')).toEqual(['unparsed'])
    expect(kinds('echo `ls')).toEqual(['unparsed'])
    expect(kinds('echo )')).toEqual(['unparsed'])
    expect(kinds('cat <<EOF')).toEqual(['unparsed'])
  })

  it('drops comments and empty segments', () => {
    expect(analyzeCommand('echo a # && rm -rf /\nls ;; ').segments).toEqual(['echo a', 'ls'])
    expect(analyzeCommand('echo a#b').segments).toEqual(['echo a#b'])
    expect(analyzeCommand('  # nothing\n').segments).toEqual([])
  })

  it('skips here-document bodies but still finds substitutions in expanding ones', () => {
    expect(analyzeCommand('cat <<EOF\nrm -rf /\n$(whoami)\nEOF\nls')).toEqual({
      segments: ['cat <<EOF', 'whoami', 'ls'],
      risky: [{ kind: 'command-substitution', text: '$(whoami)' }]
    })
    expect(analyzeCommand("cat <<'EOF'\n$(whoami)\nEOF")).toEqual({ segments: ["cat <<'EOF'"], risky: [] })
  })

  it('joins a backslash-newline continuation into one segment', () => {
    expect(analyzeCommand('npm \\\n  test').segments).toHaveLength(1)
  })
})

describe('command readings', () => {
  it('strips assignments, keywords, quoting and a path-qualified command word for restricting rules', () => {
    expect(commandReadings("FOO='a b' /bin/'rm' -rf /")).toContain('rm -rf /')
    expect(commandReadings('then rm $f')).toContain('rm $f')
    expect(commandReadings("r'm' -rf x")).toContain('rm -rf x')
  })

  it('always keeps the segment as written as the first reading', () => {
    expect(commandReadings('npm test')).toEqual(['npm test'])
  })

  it('removes shell quoting like the shell does', () => {
    expect(dequoteShellWord(`'a b'"c\\"d"e\\ f`)).toBe('a bc"de f')
  })
})
