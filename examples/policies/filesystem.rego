# Filesystem tools may only touch paths under the allowed prefixes, and
# never with ".." segments that could climb out of them.
package acs.filesystem

import rego.v1

import data.acs.common

fs := data.filesystem

path_arguments contains path if {
	common.matches_any(fs.tools)
	some name in fs.path_arguments
	path := common.arguments[name]
}

inside_allowed(path) if {
	some prefix in fs.allowed_prefixes
	startswith(path, prefix)
	not contains(path, "/../")
	not endswith(path, "/..")
}

deny contains {
	"code": "path_not_allowed",
	"rule": "filesystem-path-allow-list",
	"reason": sprintf("%s may not touch %s", [common.tool_name, path]),
} if {
	common.tool_call
	some path in path_arguments
	not inside_allowed(path)
}
