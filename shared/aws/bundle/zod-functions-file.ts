/** The file, beside each function's bundle, that holds the zod functions it loads on first use. */
export const ZOD_FUNCTIONS_FILE = 'zod-functions.js';
