# Tools the server marks destructive (annotations.destructiveHint) are
# asked of a human for some roles and denied outright for others.
package acs.writes

import rego.v1

import data.acs.common

destructive if common.annotation("destructiveHint") == true

has_role(listed) if {
	some role in common.roles
	role in listed
}

ask contains {
	"code": "destructive_tool",
	"rule": "ask-before-destructive-tools",
	"reason": sprintf("%s changes or deletes data", [common.tool_name]),
} if {
	common.tool_call
	destructive
	has_role(data.writes.ask_roles)
}

deny contains {
	"code": "destructive_tool",
	"rule": "no-destructive-tools-for-role",
	"reason": sprintf("%s changes or deletes data, which %v may not do", [common.tool_name, common.roles]),
} if {
	common.tool_call
	destructive
	has_role(data.writes.deny_roles)
}
