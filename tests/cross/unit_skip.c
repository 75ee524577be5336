/*
 * Linked into the unit tests built for other architectures (make cross):
 * the tests named by $CMOCKA_SKIP, a cmocka pattern, are not run.  Under
 * qemu-user an exhaustive test that takes seconds natively takes minutes;
 * tests/cross/run-cross.sh names those it leaves out and says why.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

static void __attribute__((constructor))
unit_skip(void)
{
	const char *pattern = getenv("CMOCKA_SKIP");

	if (pattern != NULL && *pattern != '\0')
		cmocka_set_skip_filter(pattern);
}
