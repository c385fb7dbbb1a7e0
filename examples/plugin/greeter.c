/* A plugin in C: shipped in a release as greeter.so and loaded with assetpatch_plugin_load.
 * Built twice by the demo, with GREETER_VERSION 1 and 2, to show an update changing behaviour. */
#ifndef GREETER_VERSION
#define GREETER_VERSION 1
#endif

#define STR2(x) #x
#define STR(x) STR2(x)

/* The entry symbol declared with `publish --plugin greeter=plugins/greeter.so:greeter_greet`. */
const char *greeter_greet(void) {
#if GREETER_VERSION >= 2
    return "Greetings from greeter " STR(GREETER_VERSION) ": now with snow!";
#else
    return "Hello from greeter " STR(GREETER_VERSION);
#endif
}

int greeter_version(void) { return GREETER_VERSION; }
