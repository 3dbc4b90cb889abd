# Shell tools may not run destructive commands (data.shell.destructive,
# regular expressions over the command text).
package acs.shell

import rego.v1

import data.acs.common

command := common.arguments.command if common.matches_any(data.shell.tools)

deny contains {
	"code": "destructive_command",
	"rule": "no-destructive-shell",
	"reason": sprintf("the command %q is destructive", [command]),
} if {
	common.tool_call
	some pattern in data.shell.destructive
	regex.match(pattern, command)
}
