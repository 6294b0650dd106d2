"""The words of the apps that still keep them here, one catalog (``MSG``) per app. Everything
else is in the one message catalog of apps and plots, ``words/`` (see docs/apps.md), and these
modules move there too."""
