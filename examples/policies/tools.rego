# Per-role tool allow lists (data.roles.<role>.tools, glob patterns).
package acs.tools

import rego.v1

import data.acs.common

allowed if {
	some role in common.roles
	common.matches_any(data.roles[role].tools)
}

deny contains {
	"code": "tool_not_allowed",
	"rule": "role-tool-allow-list",
	"reason": sprintf("no role of %s (%v) may call %s", [common.user_id, common.roles, common.tool_name]),
} if {
	common.tool_call
	not allowed
}
