# Rules that hold only where metadata.environment is "production":
# debugging tools are off, and any tool not marked read-only is asked first.
package acs.production

import rego.v1

import data.acs.common

production if common.environment == "production"

deny contains {
	"code": "not_in_production",
	"rule": "production-denied-tools",
	"reason": sprintf("%s is not available in production", [common.tool_name]),
} if {
	common.tool_call
	production
	common.matches_any(data.production.denied_tools)
}

ask contains {
	"code": "production_write",
	"rule": "production-ask-for-writes",
	"reason": sprintf("%s is not marked read-only and this is production", [common.tool_name]),
} if {
	common.tool_call
	production
	common.annotation("readOnlyHint") != true
	not "admin" in common.roles
}
