#!/usr/bin/env node
// The house's shape, measured from the sources (docs/development.md, "Layout checks"): per package
// its folders; for packages/actors/src the arrows between its folders and how many run back up
// against the layer order in scripts/actors-layers.json (which docs/architecture.md quotes); the
// import cycles among files in packages/ (type imports included, since a type-only cycle still ties
// two modules' designs together); functions over 80 lines; `as` casts in src (not `as const`).
//
//   node scripts/house-metrics.mjs                  print every figure
//   node scripts/house-metrics.mjs --check-cycles   exit 1, listing each cycle, if packages/ has one
//                                                   or an actors folder imports a folder above it
//   node scripts/house-metrics.mjs --layers <json>  measure against another layer order
//   node scripts/house-metrics.mjs --root <dir>     measure the packages/ of another tree (the
//                                                   check's own test builds one: test/house-metrics.test.ts)
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const args = process.argv.slice(2)
const optionOf = (flag) => {
  const at = args.indexOf(flag)
  if (at < 0) return undefined
  const value = args[at + 1]
  if (value === undefined || value.startsWith('--')) {
    console.error(`house-metrics: ${flag} needs a value`)
    process.exit(2)
  }
  return resolve(value)
}
const root = optionOf('--root') ?? repo
const packagesDir = join(root, 'packages')
const checkOnly = args.includes('--check-cycles')
// The layer order is the repository's unless told otherwise, whichever tree is measured.
const layersFile = optionOf('--layers') ?? join(repo, 'scripts', 'actors-layers.json')
const longFunctionLines = 80

const rel = (file) => relative(root, file).split(sep).join('/')

const walk = (dir) =>
  readdirSync(dir).flatMap((name) => {
    if (name === 'node_modules' || name === 'dist' || name === 'test-artifacts') return []
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return walk(path)
    return /\.(m?ts|tsx)$/.test(name) && !name.endsWith('.d.ts') ? [path] : []
  })

const packages = readdirSync(packagesDir).filter((name) => existsSync(join(packagesDir, name, 'package.json')))
const manifests = new Map(
  packages.map((name) => {
    const manifest = JSON.parse(readFileSync(join(packagesDir, name, 'package.json'), 'utf8'))
    return [manifest.name, { dir: join(packagesDir, name), exports: manifest.exports ?? {} }]
  })
)
// A package's entry points (its exports map's sources) are its public face, as index.ts files are:
// re-exporting there is what they are for.
const entryPoints = new Set(
  [...manifests.values()].flatMap(({ dir, exports }) =>
    Object.values(exports).flatMap((entry) => (typeof entry === 'object' && entry !== null && entry.source ? [resolve(dir, entry.source)] : []))
  )
)
const files = packages.flatMap((name) => walk(join(packagesDir, name)))
const fileSet = new Set(files)

// A specifier to the file it names: relative ones by the `.js` → `.ts` rule the sources follow,
// workspace packages through their exports map's `source` condition.
const resolveSpecifier = (from, specifier) => {
  if (specifier.startsWith('.')) {
    const base = resolve(dirname(from), specifier)
    const candidates = [base.replace(/\.js$/, '.ts'), base.replace(/\.mjs$/, '.mts'), base.replace(/\.js$/, '.tsx'), base, `${base}.ts`, join(base, 'index.ts')]
    return candidates.find((candidate) => fileSet.has(candidate))
  }
  const match = /^(@[^/]+\/[^/]+|[^@/][^/]*)(\/.*)?$/.exec(specifier)
  const manifest = match && manifests.get(match[1])
  if (!manifest) return undefined
  const entry = manifest.exports[`.${match[2] ?? ''}`]
  const source = typeof entry === 'object' && entry !== null ? entry.source : undefined
  return source ? resolve(manifest.dir, source) : undefined
}

const lineOf = (sourceFile, position) => sourceFile.getLineAndCharacterOfPosition(position).line + 1

const functionName = (node) => {
  if (node.name && ts.isIdentifier(node.name)) return node.name.text
  if (node.name) return node.name.getText()
  const parent = node.parent
  if (parent && (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) && parent.name) {
    return parent.name.getText()
  }
  if (parent && ts.isCallExpression(parent)) return `<callback of ${parent.expression.getText().slice(0, 40)}>`
  return '<anonymous>'
}

const imports = new Map() // file → Set of files it imports (type imports included)
const reExports = [] // re-exports outside index.ts files, within one package
const longFunctions = []
let casts = 0

for (const file of files) {
  const text = readFileSync(file, 'utf8')
  const sourceFile = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const targets = new Set()
  const imported = new Set() // names bound by an import, to spot `export { x }` of one
  const inSrc = rel(file).split('/')[2] === 'src'
  const isIndex = /(^|\/)index\.ts$/.test(file) || entryPoints.has(file)
  const add = (specifier) => {
    const target = resolveSpecifier(file, specifier)
    if (target && fileSet.has(target)) targets.add(target)
    return target
  }
  const visit = (node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      add(node.moduleSpecifier.text)
      const clause = node.importClause
      if (clause?.name) imported.add(clause.name.text)
      if (clause?.namedBindings && ts.isNamedImports(clause.namedBindings)) for (const element of clause.namedBindings.elements) imported.add(element.name.text)
      if (clause?.namedBindings && ts.isNamespaceImport(clause.namedBindings)) imported.add(clause.namedBindings.name.text)
    } else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference) &&
      ts.isStringLiteral(node.moduleReference.expression)
    ) {
      add(node.moduleReference.expression.text)
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      const target = add(node.moduleSpecifier.text)
      if (inSrc && !isIndex && node.moduleSpecifier.text.startsWith('.') && target) {
        reExports.push(`${rel(file)}:${lineOf(sourceFile, node.getStart())} re-exports ${rel(target)}`)
      }
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      add(node.argument.literal.text)
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0])
    ) {
      add(node.arguments[0].text)
    }
    if (inSrc && (ts.isAsExpression(node) || ts.isTypeAssertionExpression(node))) {
      const type = node.type
      const isConst = ts.isTypeReferenceNode(type) && ts.isIdentifier(type.typeName) && type.typeName.text === 'const'
      if (!isConst) casts += 1
    }
    if (
      inSrc &&
      (ts.isFunctionDeclaration(node) ||
        ts.isFunctionExpression(node) ||
        ts.isArrowFunction(node) ||
        ts.isMethodDeclaration(node) ||
        ts.isGetAccessorDeclaration(node) ||
        ts.isSetAccessorDeclaration(node) ||
        ts.isConstructorDeclaration(node)) &&
      node.body
    ) {
      const lines = lineOf(sourceFile, node.getEnd()) - lineOf(sourceFile, node.getStart()) + 1
      if (lines > longFunctionLines) longFunctions.push({ name: functionName(node), file: `${rel(file)}:${lineOf(sourceFile, node.getStart())}`, lines })
    }
    ts.forEachChild(node, visit)
  }
  visit(sourceFile)
  // `import { x } from './y.js'` then `export { x }` is a re-export too.
  if (inSrc && !isIndex) {
    for (const statement of sourceFile.statements) {
      if (ts.isExportDeclaration(statement) && !statement.moduleSpecifier && statement.exportClause && ts.isNamedExports(statement.exportClause)) {
        for (const element of statement.exportClause.elements) {
          const local = (element.propertyName ?? element.name).text
          if (imported.has(local)) reExports.push(`${rel(file)}:${lineOf(sourceFile, statement.getStart())} re-exports ${local}`)
        }
      }
    }
  }
  imports.set(file, targets)
}

// Tarjan's strongly connected components over the file graph; a component of more than one file,
// or a file importing itself, is a cycle.
const cycles = (() => {
  let index = 0
  const indices = new Map()
  const lowlinks = new Map()
  const onStack = new Set()
  const stack = []
  const found = []
  const strongConnect = (start) => {
    // Iterative, so a deep import chain cannot overflow the call stack.
    const work = [{ node: start, edges: [...imports.get(start)], at: 0 }]
    indices.set(start, index)
    lowlinks.set(start, index)
    index += 1
    stack.push(start)
    onStack.add(start)
    while (work.length > 0) {
      const frame = work[work.length - 1]
      if (frame.at < frame.edges.length) {
        const next = frame.edges[frame.at]
        frame.at += 1
        if (!indices.has(next)) {
          indices.set(next, index)
          lowlinks.set(next, index)
          index += 1
          stack.push(next)
          onStack.add(next)
          work.push({ node: next, edges: [...imports.get(next)], at: 0 })
        } else if (onStack.has(next)) {
          lowlinks.set(frame.node, Math.min(lowlinks.get(frame.node), indices.get(next)))
        }
        continue
      }
      work.pop()
      if (work.length > 0) {
        const parent = work[work.length - 1].node
        lowlinks.set(parent, Math.min(lowlinks.get(parent), lowlinks.get(frame.node)))
      }
      if (lowlinks.get(frame.node) === indices.get(frame.node)) {
        const component = []
        let member
        do {
          member = stack.pop()
          onStack.delete(member)
          component.push(member)
        } while (member !== frame.node)
        if (component.length > 1 || imports.get(frame.node).has(frame.node)) found.push(component.map(rel).sort())
      }
    }
  }
  for (const file of files) if (!indices.has(file)) strongConnect(file)
  return found.sort((a, b) => b.length - a.length || a[0].localeCompare(b[0]))
})()

// Folders of packages/actors/src: the first path segment under src (a file at src's top is `.`).
// index.ts is the package's public face and imports every folder, so it draws no arrows.
const actorsSrc = join(packagesDir, 'actors', 'src')
const folderOf = (file) => {
  const parts = relative(actorsSrc, file).split(sep)
  return parts.length > 1 ? parts[0] : '.'
}
// One folder a rank, bottom first: a folder imports only the folders before it in the list.
const layers = JSON.parse(readFileSync(layersFile, 'utf8')).order
const rankOf = new Map(layers.map((layer, rank) => [layer.folder, rank]))
const arrows = new Map() // "from → to" → number of imports
for (const [file, targets] of imports) {
  if (!file.startsWith(actorsSrc + sep) || file === join(actorsSrc, 'index.ts')) continue
  for (const target of targets) {
    if (!target.startsWith(actorsSrc + sep)) continue
    const from = folderOf(file)
    const to = folderOf(target)
    if (from !== to) arrows.set(`${from} → ${to}`, (arrows.get(`${from} → ${to}`) ?? 0) + 1)
  }
}
const upward = [...arrows.keys()].filter((arrow) => {
  const [from, to] = arrow.split(' → ')
  // A folder the layer file does not name counts as out of order: the file must name them all.
  return !rankOf.has(from) || !rankOf.has(to) || rankOf.get(to) > rankOf.get(from)
})

if (checkOnly) {
  const failures = [
    ...cycles.map((cycle) => `import cycle (${cycle.length} files): ${cycle.join(', ')}`),
    ...upward.map((arrow) => `packages/actors/src: ${arrow} imports a folder above it (scripts/actors-layers.json)`)
  ]
  for (const failure of failures) console.error(failure)
  if (failures.length > 0) process.exit(1)
  console.log('house-metrics: no import cycle in packages/, actors folders import only downward')
  process.exit(0)
}

console.log('## Folders of packages/*/src')
for (const name of packages) {
  const src = join(packagesDir, name, 'src')
  if (!existsSync(src)) continue
  const folders = readdirSync(src).filter((entry) => statSync(join(src, entry)).isDirectory())
  console.log(`${name}: ${folders.length} folders: ${folders.join(', ')}`)
}
console.log(
  `\n## packages/actors/src: ${new Set([...arrows.keys()].flatMap((arrow) => arrow.split(' → '))).size} folders with arrows, ${arrows.size} arrows between folders, ${upward.length} back up (layers: ${relative(repo, layersFile).split(sep).join('/')})`
)
console.log(`order, bottom first: ${layers.map((layer) => layer.folder).join(' < ')}`)
for (const [arrow, count] of [...arrows].sort()) {
  const mark = upward.includes(arrow) ? '  BACK UP' : ''
  console.log(`  ${arrow} (${count})${mark}`)
}
console.log(`\n## Import cycles among files in packages/ (type imports included): ${cycles.length}`)
for (const cycle of cycles) console.log(`  ${cycle.length} files: ${cycle.join(', ')}`)
console.log(`\n## In-package re-exports outside index.ts files: ${reExports.length}`)
for (const line of reExports) console.log(`  ${line}`)
console.log(`\n## Functions over ${longFunctionLines} lines in packages/*/src: ${longFunctions.length}`)
for (const fn of longFunctions.sort((a, b) => b.lines - a.lines)) console.log(`  ${fn.lines} ${fn.name} ${fn.file}`)
console.log(`\n## \`as\` casts in packages/*/src (not \`as const\`): ${casts}`)
