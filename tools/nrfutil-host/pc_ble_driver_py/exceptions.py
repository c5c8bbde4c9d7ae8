"""pc_ble_driver_py.exceptions."""


class NordicSemiException(Exception):
    def __init__(self, message, error_code=None):
        super().__init__(message)
        self.error_code = error_code


class IllegalStateException(NordicSemiException):
    pass
