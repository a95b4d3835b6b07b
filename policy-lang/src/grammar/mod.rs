//! The pest grammar (`vcl.pest`) and the names users read for its rules.
//!
//! Only `ast::lower` consumes the parser; everything downstream sees the AST.

use pest_derive::Parser;

#[derive(Parser)]
#[grammar = "grammar/vcl.pest"]
pub(crate) struct VclParser;

/// What a rule is called in a "expected ..." message.
///
/// Keeps internal rule names out of user-facing text (the job pest's
/// `Error::renamed_rules` does; we build our own message from the same data).
pub(crate) fn describe_rule(rule: &Rule) -> &'static str {
    match rule {
        Rule::EOI => "end of file",
        Rule::semi => "`;`",
        Rule::lbrace => "`{`",
        Rule::rbrace => "`}`",
        Rule::lparen => "`(`",
        Rule::rparen => "`)`",
        Rule::equals => "`=`",
        Rule::comma => "`,`",
        Rule::or_op | Rule::and_op | Rule::cmp_op | Rule::add_op | Rule::mul_op => "an operator",
        Rule::not_op | Rule::neg_op => "an expression",
        Rule::assign_op => "`=`, `+=` or another assignment operator",
        Rule::vcl_version | Rule::kw_vcl => "`vcl 4.1;`",
        Rule::version_number => "a version number such as `4.1`",
        Rule::import_decl | Rule::kw_import => "`import`",
        Rule::kw_from => "`from`",
        Rule::include_decl | Rule::kw_include => "`include`",
        Rule::backend_decl | Rule::kw_backend => "`backend`",
        Rule::kw_none => "`none`",
        Rule::probe_decl | Rule::kw_probe => "`probe`",
        Rule::plugin_decl | Rule::kw_plugin => "`plugin`",
        Rule::acl_decl | Rule::kw_acl => "`acl`",
        Rule::sub_decl | Rule::kw_sub => "`sub`",
        Rule::inline_c => "inline C",
        Rule::attribute_block => "`{`",
        Rule::attribute | Rule::attr_name => "an attribute such as `.host`",
        Rule::attr_value | Rule::string_list => "a value",
        Rule::acl_flag => "an ACL flag",
        Rule::acl_entry | Rule::acl_addr => "an ACL entry such as `\"10.0.0.0\"/8;`",
        Rule::acl_negate => "`!`",
        Rule::acl_mask => "a mask length",
        Rule::block => "`{`",
        Rule::set_stmt | Rule::kw_set => "`set`",
        Rule::unset_stmt | Rule::kw_unset => "`unset`",
        Rule::kw_remove => "`remove`",
        Rule::if_stmt | Rule::kw_if => "`if`",
        Rule::elsif_clause | Rule::kw_elsif | Rule::kw_elseif | Rule::kw_elif => "`elseif`",
        Rule::else_clause | Rule::kw_else => "`else`",
        Rule::return_stmt | Rule::kw_return => "`return`",
        Rule::return_action => "a return action such as `hash`",
        Rule::call_stmt | Rule::kw_call => "`call`",
        Rule::new_stmt | Rule::kw_new => "`new`",
        Rule::call_expr_stmt | Rule::stray_semi => "a statement",
        Rule::lvalue => "a variable",
        Rule::expr
        | Rule::and_expr
        | Rule::not_expr
        | Rule::cmp_expr
        | Rule::add_expr
        | Rule::mul_expr
        | Rule::unary_expr
        | Rule::paren_expr
        | Rule::literal
        | Rule::primary => "an expression",
        Rule::function_call => "a function call",
        Rule::arguments | Rule::argument => "an argument",
        Rule::arg_name => "an argument name",
        Rule::duration => "a duration",
        Rule::bytes => "a byte size",
        Rule::number | Rule::number_text => "a number",
        Rule::boolean => "`true` or `false`",
        Rule::string | Rule::short_string | Rule::long_string | Rule::long_string3 => "a string",
        Rule::name => "a name",
        Rule::ident | Rule::ident_part | Rule::ident_char => "an identifier",
        Rule::vcl_file | Rule::declaration => "a declaration (`backend`, `sub`, `acl`, ...)",
        Rule::statement | Rule::vcl_fragment => "a statement",
        Rule::WHITESPACE | Rule::COMMENT => "whitespace",
    }
}
