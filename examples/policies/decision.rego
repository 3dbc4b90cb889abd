# The decision every hook gets (the query data.acs.decision).
#
# Each concern lives in its own package and contributes reasons:
#   data.acs.<concern>.deny  - a set of {"code", "rule", "reason"} objects
#   data.acs.<concern>.ask   - the same shape, for steps a human must approve
#   data.acs.redact.redactions - ACS redactions for a tool's result
# This module combines them: any deny wins, then ask, then allow. Tool
# results are modified when something must be redacted. Every other hook
# (wrapped MCP messages, session steps, inventory) is left undefined, so
# the [policy] default decides it.
package acs

import rego.v1

import data.acs.common
import data.acs.filesystem
import data.acs.production
import data.acs.redact
import data.acs.shell
import data.acs.tools
import data.acs.writes

policy_id := "acs-examples"

denials := (((tools.deny | filesystem.deny) | shell.deny) | writes.deny) | production.deny

questions := writes.ask | production.ask

decision := {
	"decision": "deny",
	"reasoning": concat("; ", sort([d.reason | some d in denials])),
	"reason_codes": sort({d.code | some d in denials}),
	"policy_references": [{"policy_id": policy_id, "rule_id": first_rule(denials)}],
} if {
	input.method == "steps/toolCallRequest"
	count(denials) > 0
}

decision := {
	"decision": "ask",
	"reasoning": concat("; ", sort([q.reason | some q in questions])),
	"reason_codes": sort({q.code | some q in questions}),
	"policy_references": [{"policy_id": policy_id, "rule_id": first_rule(questions)}],
	"ask_details": {
		"question": sprintf("Allow %s to call %s?", [common.user_id, common.tool_name]),
		"timeout_seconds": 120,
		"timeout_disposition": "deny",
	},
} if {
	input.method == "steps/toolCallRequest"
	count(denials) == 0
	count(questions) > 0
}

decision := {
	"decision": "allow",
	"policy_references": [{"policy_id": policy_id, "rule_id": "role-tool-allow-list"}],
} if {
	input.method == "steps/toolCallRequest"
	count(denials) == 0
	count(questions) == 0
}

decision := {
	"decision": "modify",
	"reasoning": "secrets and personal data are removed from tool output",
	"reason_codes": ["redacted"],
	"policy_references": [{"policy_id": policy_id, "rule_id": "redact-secrets-and-pii"}],
	"modifications": {"redactions": redact.redactions},
} if {
	input.method == "steps/toolCallResult"
	count(redact.redactions) > 0
}

# The rule named in policy_references: the first in sort order, so the
# answer does not depend on evaluation order.
first_rule(reasons) := sort([r.rule | some r in reasons])[0]
