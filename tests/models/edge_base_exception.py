"""Importing the file raises the user's own BaseException subclass."""


class Abandon(BaseException):
    pass


raise Abandon("not today")
