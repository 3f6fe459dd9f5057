/* Parsing symbolic integers back from their printed form. */
#include <criterion/criterion.h>
#include <string.h>

#include "mixrt/shape.h"

static mx_symtab *T;
static void setup(void) { cr_assert_eq(mx_symtab_create(&T), MX_OK); }
static void teardown(void) { mx_symtab_destroy(T); }

/* Builds expressions, prints them, parses the text and expects the very same dim. */
Test(sym_parse, round_trips_printed_forms, .init = setup, .fini = teardown) {
  mx_dim s = mx_sym_named(T, "seq"), b = mx_sym_named(T, "batch"), p = mx_sym_named(T, "attn/Shape.n");
  mx_dim cases[] = {
      7,
      mx_sym_const(T, -3),
      s,
      mx_sym_add(T, s, 1),
      mx_sym_sub(T, s, 1),
      mx_sym_mul(T, 2, s),
      mx_sym_mul(T, b, s),
      mx_sym_add(T, mx_sym_mul(T, s, s), mx_sym_neg(T, b)),
      mx_sym_floordiv(T, mx_sym_add(T, mx_sym_mul(T, 2, s), 1), 2),
      mx_sym_ceildiv(T, s, 4),
      mx_sym_mod(T, s, 3),
      mx_sym_min(T, s, b),
      mx_sym_max(T, mx_sym_add(T, s, 1), 512),
      mx_sym_add(T, p, 1),
      mx_sym_mul(T, mx_sym_min(T, s, 512), mx_sym_add(T, b, 2)),
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char text[256];
    mx_sym_format(T, cases[i], text, sizeof text);
    mx_dim back;
    cr_assert_eq(mx_sym_parse(T, text, &back), MX_OK, "'%s' did not parse", text);
    cr_assert_eq(back, cases[i], "'%s' parsed to a different expression", text);
  }
}

Test(sym_parse, rejects_garbage_without_adding_symbols, .init = setup, .fini = teardown) {
  const char *bad[] = {"", "a +", "(a", "min(a)", "a b", "floor(a)", "3 +", "a^0", "a^x", "-", "a,b"};
  size_t before = mx_symtab_symbol_count(T);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    mx_dim d;
    cr_assert_eq(mx_sym_parse(T, bad[i], &d), MX_ERR_MALFORMED, "'%s' should not parse", bad[i]);
  }
  cr_assert_eq(mx_symtab_symbol_count(T), before);
  mx_dim d;
  cr_assert_eq(mx_sym_parse(T, "2*x + x", &d), MX_OK);
  cr_assert_eq(d, mx_sym_mul(T, 3, mx_sym_named(T, "x")));
}
