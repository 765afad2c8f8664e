// Evaluates IAM requests against identity policies with @cloud-copilot/iam-simulate (AWS's own action
// and condition-key data), offline. Reads {"simulations": [{id, policy, action, resource, context}]} on
// stdin and writes [{id, result, errors}] on stdout. IAM_SIMULATE_DIR is where npm installed it.
import { createRequire } from 'node:module'
import path from 'node:path'

const require = createRequire(path.resolve(process.env.IAM_SIMULATE_DIR, 'package.json'))
const { runSimulation } = require('@cloud-copilot/iam-simulate')

let input = ''
for await (const chunk of process.stdin) input += chunk
const { account, simulations } = JSON.parse(input)
const answers = []
for (const s of simulations) {
  const response = await runSimulation(
    {
      identityPolicies: [{ name: s.id, policy: s.policy }],
      serviceControlPolicies: [],
      resourceControlPolicies: [],
      request: {
        action: s.action,
        principal: `arn:aws:iam::${account}:role/${s.role}`,
        resource: { accountId: account, resource: s.resource },
        contextVariables: s.context || {},
      },
    },
    {},
  )
  answers.push({
    id: s.id,
    result: response.resultType === 'error' ? 'error' : response.overallResult,
    errors: response.resultType === 'error' ? response.errors : undefined,
  })
}
process.stdout.write(JSON.stringify(answers))
