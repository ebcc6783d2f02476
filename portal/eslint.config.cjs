// eslint (flat config) for the portal's JavaScript: the recommended rules and the browser's
// globals. CommonJS, so that `require` finds the packages through NODE_PATH: they are
// installed outside the repository (scripts/lib.sh check_portal_scripts).
const js = require('@eslint/js');
const globals = require('globals');

module.exports = [
  js.configs.recommended,
  {
    files: ['assets/*.js'],
    languageOptions: {
      ecmaVersion: 2023,
      sourceType: 'module',
      globals: { ...globals.browser },
    },
  },
];
